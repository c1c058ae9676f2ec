"""The endpoint benchmark's pure helpers (bench/endpoints.py): what counts as ready, when an
endpoint was first seen, percentiles, and which writes are EndpointSlice writes."""

from __future__ import annotations

import pytest

from bench.endpoints import (
    FirstSeen,
    percentile,
    pod_ready_address,
    ready_addresses,
    ready_on_hub,
    slice_writes,
)
from bench.hubwrites import parse


def test_the_nearest_rank_percentile() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(reversed(values), 1.0) == 100.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([3.0, 1.0, 2.0], 0.0) == 1.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_only_ready_endpoints_count() -> None:
    endpoint_slice = {
        "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": False}},
            {"addresses": ["10.0.0.3"], "conditions": {}},
            {"addresses": ["10.0.0.4"]},
        ]
    }
    assert ready_addresses(endpoint_slice) == {"10.0.0.1"}
    assert ready_addresses({"endpoints": None}) == set()


def test_a_pod_has_a_ready_address_once_ready_with_an_ip() -> None:
    ready = {"type": "Ready", "status": "True"}
    assert pod_ready_address({"status": {"podIP": "10.0.0.1", "conditions": [ready]}}) == (
        "10.0.0.1"
    )
    not_ready = {"type": "Ready", "status": "False"}
    assert pod_ready_address({"status": {"podIP": "10.0.0.1", "conditions": [not_ready]}}) is None
    assert pod_ready_address({"status": {"conditions": [ready]}}) is None
    assert pod_ready_address({}) is None


def test_first_seen_keeps_the_first_moment_and_leaves_out_what_was_listed() -> None:
    seen = FirstSeen()
    seen.see([("us-east", "10.0.0.1")], 1.0, listed=True)
    seen.see([("us-east", "10.0.0.1"), ("us-east", "10.0.0.2")], 2.0)
    seen.see([("us-east", "10.0.0.2"), ("eu-west", "10.0.0.2")], 3.0)
    assert seen.at == {("us-east", "10.0.0.2"): 2.0, ("eu-west", "10.0.0.2"): 3.0}


def test_ready_endpoints_per_service_on_the_hub() -> None:
    def hub_slice(service: str, *ready: str) -> dict[str, object]:
        return {
            "metadata": {"labels": {"kubernetes.io/service-name": service}},
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in ready],
        }

    slices = [hub_slice("d0", "10.0.0.1"), hub_slice("d0", "10.0.0.1", "10.0.0.2")]
    assert ready_on_hub([*slices, hub_slice("d1")]) == {"d0": 3, "d1": 0}


def test_slice_writes_by_verb_successes_apart() -> None:
    def sample(resource: str, verb: str, value: int, code: int = 200) -> str:
        labels = f'code="{code}",dry_run="",group="discovery.k8s.io",resource="{resource}"'
        return f'apiserver_request_total{{{labels},subresource="",verb="{verb}"}} {value}'

    text = "\n".join(
        [
            sample("endpointslices", "POST", 5, 201),
            sample("endpointslices", "PUT", 7),
            sample("endpointslices", "PUT", 2, 409),
            sample("endpointslices", "APPLY", 4),
            sample("endpointslices", "LIST", 40),
            sample("other", "PUT", 3),
        ]
    )
    assert slice_writes(parse(text)) == {"POST": 5.0, "PUT": 9.0, "APPLY": 4.0}
    assert slice_writes(parse(text, succeeded=True)) == {"POST": 5.0, "PUT": 7.0, "APPLY": 4.0}
