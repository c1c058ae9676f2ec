"""kmc-apiserver: the aggregated API server of kubectl-mc and home of its control loops.

One process serves `mc.kmc.dev` and `remote.kmc.dev` through the hub's aggregator and, in the
leader, runs the location, placement and sync loops. It keeps no state of its own: all it
knows is rebuilt from the hub and the children when it starts.
"""
