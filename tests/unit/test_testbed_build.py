"""The wrapper-module replaces are derived from upstream go.mod files, not typed by hand."""

from kmc_testbed.bed import BedError, parse_labels
from kmc_testbed.build import _go_line, _relative_replaces

KUBERNETES_GOMOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tk8s.io/api v0.0.0
\tgithub.com/foo/bar v1.2.3
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""

ETCD_GOMOD = """module go.etcd.io/etcd/server/v3

go 1.26.0

replace (
\tgo.etcd.io/etcd/api/v3 => ../api
\tgo.etcd.io/etcd/pkg/v3 => ../pkg
)

// Bad imports are sometimes causing attempts to pull that code.
replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
replace github.com/x/y v1.0.0 => github.com/x/y v1.0.1
"""


def test_staging_replaces_come_from_the_upstream_gomod() -> None:
    assert _relative_replaces(KUBERNETES_GOMOD) == ["k8s.io/api", "k8s.io/client-go"]
    assert _go_line(KUBERNETES_GOMOD) == "1.24.0"


def test_sibling_replaces_skip_forbidden_and_versioned_ones() -> None:
    assert _relative_replaces(ETCD_GOMOD) == ["go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/pkg/v3"]


def test_labels_parse_and_reject_garbage() -> None:
    assert parse_labels("a=1, b = 2,") == {"a": "1", "b": "2"}
    assert parse_labels("") == {}
    try:
        parse_labels("a=1,b")
    except BedError as err:
        assert "'b'" in str(err)
    else:
        raise AssertionError("a label without '=' was accepted")
