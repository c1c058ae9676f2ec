"""`mc.kmc.dev`: placement views of hub workloads, their rows, and their sub-resources."""
