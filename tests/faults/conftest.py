"""Fault tests share the e2e fixtures: the same real test bed, the same real kubectl."""

from tests.e2e.conftest import installed, kubectl, namespace, testbed_up

__all__ = ["installed", "kubectl", "namespace", "testbed_up"]
