"""Fault tests share the e2e fixtures: the same real test bed, the same real kubectl."""

from tests.e2e.conftest import (
    children_cleaned_up,
    installed,
    kmc_never_forbidden,
    kubectl,
    namespace,
    testbed_up,
)

__all__ = [
    "children_cleaned_up",
    "installed",
    "kmc_never_forbidden",
    "kubectl",
    "namespace",
    "testbed_up",
]
