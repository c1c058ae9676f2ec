"""kubectl-mc: the kubectl plugin for transparent multi-cluster (`kubectl mc …`).

It never imports `apiserver`: everything it knows comes from the hub over HTTP.
"""

__version__ = "0.1.0"
