"""Negotiating a whole CRD: who takes part, which versions, and a verdict per location."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.imports.negotiate import State, digest, misfits, negotiate, version_order
from apiserver.objects import Obj


def crd(*versions: str, fields: dict[str, Any] | None = None, kind: str = "Widget") -> Obj:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"size": {"type": "integer"}} if fields is None else fields,
            }
        },
    }
    return {
        "metadata": {"name": "widgets.example.org"},
        "spec": {
            "group": "example.org",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": kind},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": schema},
                }
                for i, v in enumerate(versions)
            ],
        },
    }


def test_the_hub_serves_the_versions_every_location_serves_storing_the_highest() -> None:
    decision = negotiate(
        {"a": crd("v1beta1", "v1"), "b": crd("v1", "v1beta1", "v2alpha1"), "c": None},
        hub=None,
        owned=False,
        locked=False,
    )
    assert decision.versions == ("v1beta1", "v1")
    assert decision.storage == "v1"
    assert decision.verdicts["c"].state == State.MISSING
    assert {decision.verdicts[n].state for n in "ab"} == {State.COMPATIBLE}


def test_a_location_with_another_kind_or_no_shared_version_is_incompatible() -> None:
    decision = negotiate(
        {"a": crd("v1"), "b": crd("v1", kind="Gadget"), "c": crd("v2")},
        hub=None,
        owned=False,
        locked=False,
    )
    assert decision.verdicts["a"].state == State.COMPATIBLE
    assert decision.verdicts["b"].state == State.INCOMPATIBLE
    assert decision.verdicts["b"].paths == ("spec.names.kind: Widget != Gadget",)
    assert decision.verdicts["c"].paths == ("v1: not served",)


def test_a_user_crd_is_never_written_only_judged_against() -> None:
    user = crd("v1", fields={"size": {"type": "integer"}, "color": {"type": "string"}})
    decision = negotiate({"a": crd("v1"), "b": copy.deepcopy(user)}, user, False, False)
    assert decision.spec is None
    assert decision.verdicts["a"].state == State.INCOMPATIBLE
    assert decision.verdicts["a"].paths == ("v1: spec.color",)
    assert decision.verdicts["b"].state == State.COMPATIBLE


def test_with_objects_on_the_hub_the_schema_does_not_shrink_but_may_grow() -> None:
    hub = {**crd("v1"), "spec": negotiate({"a": crd("v1")}, None, False, False).spec}
    narrower = crd("v1", fields={})
    wider = crd("v1", fields={"size": {"type": "integer"}, "color": {"type": "string"}})
    decision = negotiate({"a": wider, "b": narrower}, hub, owned=True, locked=True)
    assert decision.verdicts["b"].state == State.INCOMPATIBLE
    assert decision.verdicts["b"].paths == ("v1: spec.size",)
    assert decision.spec is not None
    grown = decision.spec["versions"][0]["schema"]["openAPIV3Schema"]
    assert set(grown["properties"]["spec"]["properties"]) == {"size", "color"}
    unlocked = negotiate({"a": wider, "b": narrower}, hub, owned=True, locked=False)
    assert unlocked.verdicts["b"].state == State.COMPATIBLE  # nothing written yet: it narrows


def test_digests_are_stable_and_see_schema_changes_only() -> None:
    one, two = crd("v1"), crd("v1")
    two["metadata"]["resourceVersion"] = "42"
    assert digest(one) == digest(two)
    assert digest(one) != digest(crd("v1", fields={}))


def test_version_order_is_kubernetes_priority() -> None:
    names = ["v1alpha1", "v2", "v1beta2", "foo", "v1", "v1beta1", "v10"]
    assert sorted(names, key=version_order, reverse=True) == [
        "v10",
        "v2",
        "v1",
        "v1beta2",
        "v1beta1",
        "v1alpha1",
        "foo",
    ]


def test_narrow_names_the_objects_that_use_what_the_narrower_schema_drops() -> None:
    wide = crd("v1", fields={"size": {"type": "integer"}, "gloss": {"type": "boolean"}})
    narrow = crd("v1")
    locked = negotiate({"a": wide, "b": narrow}, hub=wide, owned=True, locked=True)
    assert locked.verdicts["b"].state == State.INCOMPATIBLE
    assert locked.spec is not None and "gloss" in str(locked.spec)
    candidate = negotiate({"a": wide, "b": narrow}, hub=wide, owned=True, locked=False)
    assert candidate.spec is not None and "gloss" not in str(candidate.spec)
    assert {v.state for v in candidate.verdicts.values()} == {State.COMPATIBLE}

    def widget(name: str, **spec: Any) -> Obj:
        meta = {"name": name, "namespace": "ns", "annotations": {"kmc.dev/placement": "{}"}}
        return {"apiVersion": "example.org/v1", "kind": "Widget", "metadata": meta, "spec": spec}

    objects = [widget("plain", size=2), widget("shiny", size=1, gloss=True)]
    assert misfits(objects, wide["spec"], candidate.spec) == [
        "ns/shiny (v1: spec.gloss: unknown field)"
    ]
    assert misfits(objects[:1], wide["spec"], candidate.spec) == []
    # Something the current schema already refuses is not the narrowing's doing.
    odd = widget("odd", size="big")
    assert misfits([odd], wide["spec"], candidate.spec) == []


def test_the_hub_crd_carries_the_api_approval_of_the_locations_that_take_part() -> None:
    from apiserver.loops.imports import _approval

    def approved(crd: Obj, url: str) -> Obj:
        crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": url}
        return crd

    crds: dict[str, Obj | None] = {
        "a-east": crd("v1"),  # takes part, without the annotation
        "b-west": approved(crd("v2", kind="Gadget"), "https://example/2"),  # takes no part
        "c-north": approved(crd("v1"), "https://example/1"),
        "d-none": None,
    }
    decision = negotiate(crds, None, owned=True, locked=False)
    assert decision.verdicts["b-west"].state == State.INCOMPATIBLE
    assert _approval(crds, decision) == "https://example/1"
    alone: dict[str, Obj | None] = {"a": crd("v1")}
    assert _approval(alone, negotiate(alone, None, owned=True, locked=False)) is None


def test_the_import_loop_negotiates_again_only_when_a_crd_changed(monkeypatch: Any) -> None:
    """A pass runs on every Location change; the schemas it compares change seldom."""
    from apiserver.loops import imports

    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return negotiate(*args)

    monkeypatch.setattr(imports, "negotiate", counted)
    loop = imports.ImportLoop.__new__(imports.ImportLoop)
    loop._negotiated = {}

    def versioned(obj: Obj, version: str) -> Obj:
        obj = copy.deepcopy(obj)
        obj["metadata"] |= {"uid": "u-" + version, "resourceVersion": version}
        return obj

    east, west = versioned(crd("v1"), "1"), versioned(crd("v1"), "2")
    name = "widgets.example.org"
    decision, current = loop._negotiate(name, {"east": east, "west": west}, None, False, False)
    assert decision.spec is not None and not current  # nothing on the hub yet
    again = loop._negotiate(name, {"east": copy.deepcopy(east), "west": west}, None, False, False)
    assert again == (decision, current) and len(calls) == 1  # same versions: remembered

    hub = versioned({"metadata": {"name": name}, "spec": decision.spec}, "7")
    _, current = loop._negotiate(name, {"east": east, "west": west}, hub, True, False)
    assert current and len(calls) == 2  # the hub CRD written: it says the decision

    grown = {"east": versioned(crd("v1", "v2"), "3"), "west": versioned(crd("v1", "v2"), "4")}
    decision, current = loop._negotiate(name, grown, hub, True, False)
    assert len(calls) == 3 and not current  # the locations' CRDs changed: negotiated again
    loop._negotiate(name, grown, hub, True, True)
    assert len(calls) == 4  # hub objects appeared (locked): negotiated again

    unversioned = {"east": crd("v1"), "west": crd("v1")}  # nothing to know them by
    loop._negotiate(name, unversioned, None, False, False)
    loop._negotiate(name, unversioned, None, False, False)
    assert len(calls) == 6
