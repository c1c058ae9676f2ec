"""Placement: deciding which locations run each hub object.

The decision itself is pure (`strategy` parses the annotation, `selector` matches labels and
taints, `apportion` divides replicas, `engine.decide` puts it together) so that every rule can
be tested without a cluster; the loop around it (`loops/placement/`) does the I/O.
"""
