"""Talking to Kubernetes: the HTTP client and credentials. Nothing else in apiserver/ does HTTP
to a cluster."""
