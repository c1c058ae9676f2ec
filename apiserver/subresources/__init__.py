"""`mc.kmc.dev` sub-resources of hub workloads: where an object runs, and by which strategy."""
