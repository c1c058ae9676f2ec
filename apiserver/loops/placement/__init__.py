"""The placement loop: `loop.py` wires it and sends each object to the part for its role."""
