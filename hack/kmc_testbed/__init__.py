"""The kubectl-mc test bed: real Kubernetes control planes built from source, run on loopback.

There is no container engine on our machines, so the test bed builds kube-apiserver,
kube-controller-manager, kube-scheduler, etcd and kwok from the Go module proxy (see `build`)
and runs one hub plus a few child clusters as plain processes (see `bed`). The e2e tests,
the demo and the benchmarks all stand on it.
"""
