"""Sync: making the children match the hub's placement, and the hub's status match the children."""
