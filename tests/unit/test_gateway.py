"""An HTTPRoute's entry (issue #31, item 4): it joins when the hub serves its CRD, follows the
Services its backends name, and its children's `status.parents` fold into one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from apiserver.contract import PLACEMENT, Placement
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, HTTPROUTE, PLACED, SERVICE, Key, Kind, Role, of_crd
from apiserver.kinds.gateway import MAX_PARENTS, services_of
from apiserver.loops.placement.deciding import Decider
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement import engine
from apiserver.subresources import along
from apiserver.sync.status import fold

from .follow_fakes import RecordingWriter

NOW = "2026-01-01T00:00:00Z"


def crd(version: str = "v1", scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "spec": {
            "group": "gateway.networking.k8s.io",
            "scope": scope,
            "names": {"kind": "HTTPRoute", "plural": "httproutes"},
            "versions": [
                {"name": "v1beta1", "storage": version != "v1"},
                {"name": "v1", "storage": version == "v1"},
            ],
        }
    }


def test_it_joins_with_its_own_entry_only_when_the_hub_serves_its_crd_as_we_know_it() -> None:
    assert HTTPROUTE.key not in PLACED  # never watched before its CRD is served
    assert of_crd(crd()) is HTTPROUTE
    assert HTTPROUTE.role is Role.REFERENCE_FOLLOWER and HTTPROUTE.custom
    other = of_crd(crd(version="v1beta1"))  # a version whose fields we do not know
    assert other is not None and other.role is Role.ASKED
    assert other.api_version == "gateway.networking.k8s.io/v1beta1"


def route(rules: list[dict[str, Any]], namespace: str = "shop") -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": namespace}, "spec": {"rules": rules}}


def test_it_follows_the_services_of_its_own_namespace_that_its_backends_name() -> None:
    mirror = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow"}}}
    rules: list[dict[str, Any]] = [
        {"backendRefs": [{"name": "web", "port": 80}, {"name": "api", "kind": "Service"}]},
        {
            "backendRefs": [
                {"name": "web-v2", "group": "", "filters": [mirror]},
                {"name": "bucket", "group": "storage.example", "kind": "Bucket"},
                {"name": "far", "namespace": "other"},
                {"name": "near", "namespace": "shop"},
            ],
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m"}}}],
        },
        {"matches": [{"path": {"value": "/"}}]},  # no backends: a redirect, say
    ]
    assert services_of(route(rules)) == {
        ("Service", n) for n in ("web", "api", "web-v2", "shadow", "near", "m")
    }
    assert services_of({"spec": {}}) == frozenset()


def parent(gateway: str, accepted: str, when: str, message: str = "") -> dict[str, Any]:
    return {
        "parentRef": {"name": gateway, "group": "gateway.networking.k8s.io", "kind": "Gateway"},
        "controllerName": "example.net/gateway",
        "conditions": [
            {
                "type": "Accepted",
                "status": accepted,
                "reason": "Accepted" if accepted == "True" else "NotAllowedByListeners",
                "message": message,
                "lastTransitionTime": when,
                "observedGeneration": 3,
            },
            {
                "type": "ResolvedRefs",
                "status": "True",
                "reason": "ResolvedRefs",
                "message": "",
                "lastTransitionTime": when,
            },
        ],
    }


def folded(children: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    hub = {"metadata": {"name": "web", "generation": 2}, "spec": {}}
    placement = dict.fromkeys(children)
    assert HTTPROUTE.fold_rules is not None
    return fold(hub, HTTPROUTE.fold_rules, children, placement, {}, {}, NOW)


def test_its_parents_are_one_per_parent_and_controller_with_conditions_merged() -> None:
    east = {"status": {"parents": [parent("gw", "True", "2026-01-01T00:00:01Z")]}}
    west = {
        "status": {
            "parents": [
                parent("gw", "False", "2026-01-01T00:00:05Z", "no listener"),
                parent("internal", "True", "2026-01-01T00:00:02Z"),
            ]
        }
    }
    status = folded({"us-east": east, "us-west": west})
    assert set(status) == {"parents"}  # no conditions of ours, no observedGeneration
    gw, internal = status["parents"]
    assert gw["parentRef"]["name"] == "gw" and internal["parentRef"]["name"] == "internal"
    accepted, resolved = gw["conditions"]
    assert accepted == {
        "type": "Accepted",
        "status": "False",
        "reason": "NotAllowedByListeners",
        "message": "False in us-west: no listener",
        "lastTransitionTime": "2026-01-01T00:00:05Z",
    }
    assert resolved["status"] == "True" and resolved["message"] == "True in us-east, us-west"
    assert [c["message"] for c in internal["conditions"]] == ["True in us-west"] * 2


def test_a_route_no_controller_took_has_no_parents_and_the_list_stays_in_bounds() -> None:
    assert folded({"us-east": {"status": {}}, "us-west": None}) == {"parents": []}
    many = {
        "status": {"parents": [parent(f"gw{i:02}", "True", NOW) for i in range(MAX_PARENTS + 5)]}
    }
    assert len(folded({"us-east": many})["parents"]) == MAX_PARENTS


# --- placed as a reference follower, and seen with its workload --------------------------------


class _Cache:
    def __init__(self, objects: dict[Key, Obj]) -> None:
        self.objects = objects
        self.kinds = {**PLACED, HTTPROUTE.key: HTTPROUTE}  # its CRD served

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)


def _placed(name: str, placement: str | None) -> Obj:
    annotations = {PLACEMENT: placement} if placement is not None else {}
    return {"metadata": {"name": name, "namespace": "shop", "annotations": annotations}}


async def test_a_route_goes_where_its_services_are_and_stays_home_saying_why_without() -> None:
    objects = {
        Key("Service", "shop", "web"): _placed("web", '{"us-east": null}'),
        Key("Service", "shop", "api"): _placed("api", '{"eu-west": null}'),
        Key("Service", "shop", "idle"): _placed("idle", None),
    }
    writer = RecordingWriter()
    records = Records(touched=lambda _: None)
    follower = Follower(cast(HubCache, _Cache(objects)), records, cast(Writer, writer))
    rules = [{"backendRefs": [{"name": "web"}, {"name": "api"}]}]
    key = Key(HTTPROUTE.key, "shop", "web")
    await follower.named(HTTPROUTE, key, route(rules))
    assert writer.placements == [{"eu-west": None, "us-east": None}]
    assert writer.conditions[-1][:2] == ("True", "Placed")
    assert records.followers[Key("Service", "shop", "web")] == {key}  # woken when it moves
    lonely = Key(HTTPROUTE.key, "shop", "lonely")
    await follower.named(HTTPROUTE, lonely, route([{"backendRefs": [{"name": "idle"}]}]))
    assert writer.conditions[-1] == (
        "False",
        "NothingPlaced",
        "nothing it names is placed (services/idle): it stays on the hub",
    )
    # Its status has no conditions: that is said by a Warning Event (`Writer.condition`).
    assert HTTPROUTE.folds and not HTTPROUTE.has_conditions


def test_a_route_is_listed_with_the_workload_whose_service_it_names() -> None:
    web: Obj = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}},
    }
    service = _placed("web", '{"us-east": null}')
    service["spec"] = {"selector": {"app": "web"}}
    mine = route([{"backendRefs": [{"name": "web"}]}])
    theirs = route([{"backendRefs": [{"name": "other"}]}])
    theirs["metadata"]["name"] = "other"
    went = along.companions(
        DEPLOYMENT, web, [(SERVICE, service), (HTTPROUTE, mine), (HTTPROUTE, theirs)]
    )
    assert [(kind.kind, obj["metadata"]["name"]) for kind, obj in went] == [
        ("HTTPRoute", "web"),
        ("Service", "web"),
    ]


async def test_a_route_is_not_sent_where_its_kind_is_not_served() -> None:
    objects = {Key("Service", "shop", "web"): _placed("web", '{"us-east": null, "eu-west": null}')}
    writer = RecordingWriter()
    records = Records(touched=lambda _: None)
    noted: list[tuple[str, str] | None] = []
    writer.note = lambda key, obj, note: noted.append(note)  # type: ignore[method-assign]

    def unserved(kind: Kind, placement: Placement) -> list[str]:
        return [name for name in placement if name == "eu-west"]

    follower = Follower(cast(HubCache, _Cache(objects)), records, cast(Writer, writer), unserved)
    key = Key(HTTPROUTE.key, "shop", "web")
    await follower.named(HTTPROUTE, key, route([{"backendRefs": [{"name": "web"}]}]))
    assert writer.placements == [{"us-east": None}]
    status, reason, message = writer.conditions[-1]
    assert (status, reason) == ("True", "Placed")
    assert "not eu-west: HTTPRoute is not served there" in message
    assert noted == [("NotServed", "not sent to eu-west: HTTPRoute is not served there")]


class _Locations:
    def __init__(self, locations: dict[str, Obj]) -> None:
        self.locations = locations

    def get(self, name: str) -> Obj | None:
        return self.locations.get(name)


def test_the_decider_says_where_a_crd_kind_is_not_served() -> None:
    def location(name: str, *resources: str, mode: str = "Push") -> Obj:
        spec: Obj = {"mode": mode}
        if mode == "Push":
            spec["secretRef"] = {"name": f"{name}-kubeconfig"}
        return {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": spec,
            "status": {"resources": list(resources)},
        }

    route = f"{HTTPROUTE.api_version}/HTTPRoute"
    cache = SimpleNamespace(
        locations=_Locations(
            {
                "serves": location("serves", "apps/v1/Deployment", route),
                "lacks": location("lacks", "apps/v1/Deployment"),
                "unprobed": location("unprobed"),
                "refused": location("refused", route),
                "pulled": location("pulled", mode="Pull"),  # its agent has not reported a probe
            }
        )
    )
    decider = Decider(cast(HubCache, cache), cast(Any, None), engine.Settings())
    decider.excluded = {"refused": frozenset({route})}  # the API import found it Incompatible
    everywhere: Placement = dict.fromkeys(
        ["serves", "lacks", "unprobed", "refused", "pulled", "gone"]
    )
    assert decider.unserved(HTTPROUTE, everywhere) == ["lacks", "refused", "pulled"]
    assert decider.unserved(SERVICE, everywhere) == []  # built in: served everywhere
