"""A probe's `apiDigests`: each CRD digested once, and again only when it changed."""

from __future__ import annotations

import pytest

from apiserver.imports import negotiate
from apiserver.locations import probe
from apiserver.objects import Obj

from .test_imports_negotiate import crd


def versioned(obj: Obj, uid: str, version: str) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "uid": uid, "resourceVersion": version}}


def test_each_crd_is_digested_once_and_again_only_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digested: list[str] = []

    def counting(obj: Obj) -> str:
        digested.append(obj["metadata"]["resourceVersion"])
        return negotiate.digest(obj)

    monkeypatch.setattr(probe, "digest", counting)
    memo: dict[tuple[str, str], str] = {}
    widgets = versioned(crd("v1", "v2"), "u1", "10")
    first = probe.api_digests([widgets], memo)
    assert set(first) == {"example.org/v1/Widget", "example.org/v2/Widget"}
    assert first["example.org/v1/Widget"] == negotiate.digest(widgets)
    assert digested == ["10"]  # one CRD, two versions: one digest
    assert probe.api_digests([widgets], memo) == first
    assert digested == ["10"]  # the next probe, nothing changed: none
    changed = versioned(crd("v1", "v2", fields={}), "u1", "11")
    assert (
        probe.api_digests([changed], memo)["example.org/v1/Widget"]
        != first["example.org/v1/Widget"]
    )
    assert digested == ["10", "11"]
    assert list(memo) == [("u1", "11")]  # what is gone is forgotten
    assert probe.api_digests([], memo) == {} and memo == {}
