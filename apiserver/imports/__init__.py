"""API import: the custom kinds the locations serve appear on the hub, with a negotiated
schema that every participating location honours (docs/apiimport.md)."""
