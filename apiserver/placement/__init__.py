"""Placement: deciding which locations run each hub object."""
