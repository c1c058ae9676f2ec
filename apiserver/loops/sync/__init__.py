"""The sync loop: `loop.py` wires it; each concern (children's watches, writes, fold, garbage)
has a module of its own."""
