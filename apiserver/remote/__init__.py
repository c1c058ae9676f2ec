"""`remote.kmc.dev`: punch-through reads of the children's objects, stitched into one view."""
