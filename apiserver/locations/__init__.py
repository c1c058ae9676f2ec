"""Locations: the child clusters, their credentials, and what we learn by probing them."""
