"""What went with a workload (issue #31, item 10): which objects follow it, location by
location, as the `locations` sub-resource and `kubectl mc describe` show them; and the Events a
follower gets when it goes somewhere new or leaves."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from apiserver.contract import PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import (
    CONFIGMAP,
    DEPLOYMENT,
    HORIZONTALPODAUTOSCALER,
    INGRESS,
    PLACED,
    PRIORITYCLASS,
    ROLE,
    SECRET,
    SERVICE,
    SERVICEACCOUNT,
    Key,
    Kind,
    Role,
)
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.mc import resources
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.dependencies import Went, went
from apiserver.subresources import along
from apiserver.subresources import locations as locations_sub
from apiserver.sync.report import LocationState

from .follow_fakes import RecordingWriter


def _obj(name: str, placement: Mapping[str, int | None] | None, **rest: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": "shop", "uid": f"uid-{name}"}
    if placement is not None:
        meta["annotations"] = {PLACEMENT: json.dumps(placement)}
    return {"metadata": meta, **rest}


WEB = _obj(
    "web",
    {"us-east": 2, "eu-west": 1},
    spec={
        "replicas": 3,
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "serviceAccountName": "web-sa",
                "priorityClassName": "high",
                "containers": [
                    {"name": "c", "envFrom": [{"configMapRef": {"name": "web-config"}}]}
                ],
            },
        },
    },
)
BOTH = {"us-east": None, "eu-west": None}
OTHERS: list[tuple[Kind, ReadOnly]] = [
    (CONFIGMAP, _obj("web-config", BOTH)),
    (CONFIGMAP, _obj("unused", {"us-west": None})),  # named by no one here
    (SERVICEACCOUNT, _obj("web-sa", BOTH)),
    (PRIORITYCLASS, {"metadata": {"name": "high", "annotations": {PLACEMENT: '{"us-east":null}'}}}),
    (SERVICE, _obj("web", BOTH, spec={"selector": {"app": "web"}})),
    (SERVICE, _obj("api", {"us-west": None}, spec={"selector": {"app": "api"}})),
    (SERVICE, _obj("external", BOTH, spec={"type": "ExternalName"})),  # no selector
    (
        INGRESS,
        _obj(
            "front",
            BOTH,
            spec={
                "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
                "tls": [{"secretName": "front-tls"}],
            },
        ),
    ),
    (
        INGRESS,
        _obj("api", {"us-west": None}, spec={"defaultBackend": {"service": {"name": "api"}}}),
    ),
    (SECRET, _obj("front-tls", BOTH)),
    (ROLE, _obj("reader", {"us-east": None, "eu-west": None, "us-west": None})),
    (DEPLOYMENT, _obj("other", {"us-west": 1})),  # a workload never goes "with" another
]


def _names(went_with: list[tuple[Kind, ReadOnly]]) -> list[str]:
    return [f"{kind.key}/{obj['metadata']['name']}" for kind, obj in went_with]


def test_what_follows_a_workload_is_asked_of_each_kinds_entry() -> None:
    assert _names(along.companions(DEPLOYMENT, WEB, OTHERS)) == [
        "ConfigMap/web-config",
        "Ingress/front",  # names a Service that went
        "PriorityClass/high",
        "Role/reader",  # its namespace's policy
        "Secret/front-tls",  # the Ingress's TLS Secret goes with the Ingress
        "Service/external",  # no selector: the namespace's workloads'
        "Service/web",
        "ServiceAccount/web-sa",
    ]


def test_a_reference_follower_naming_the_workload_itself_goes_with_it() -> None:
    # An autoscaler-like kind (its entry says what it names): no test of its name anywhere.
    scaler = Kind(
        "Scaler",
        "Scaler",
        "example.com/v1",
        "scalers",
        role=Role.REFERENCE_FOLLOWER,
        follows=lambda obj: frozenset({("Deployment", obj["spec"]["target"])}),
    )
    mine = (scaler, _obj("web", BOTH, spec={"target": "web"}))
    theirs = (scaler, _obj("other", {"us-west": None}, spec={"target": "other"}))
    assert _names(along.companions(DEPLOYMENT, WEB, [mine, theirs])) == ["Scaler/web"]


def test_each_location_lists_what_is_placed_there_and_whether_the_child_holds_it() -> None:
    went_with = along.companions(DEPLOYMENT, WEB, OTHERS)

    def present(kind: Kind, obj: ReadOnly) -> set[str]:
        return {"us-east"} if kind is CONFIGMAP else {"us-east", "eu-west"}

    rows = along.by_location(["eu-west", "us-east"], went_with, present)
    east = {(a.kind, a.name): a for a in rows["us-east"]}
    west = {(a.kind, a.name): a for a in rows["eu-west"]}
    assert ("PriorityClass", "high") in east and ("PriorityClass", "high") not in west
    assert east[("ConfigMap", "web-config")].present
    assert not west[("ConfigMap", "web-config")].present
    assert east[("PriorityClass", "high")].namespace is None
    assert east[("Service", "web")].shown() == {
        "kind": "Service",
        "apiVersion": "v1",
        "name": "web",
        "namespace": "shop",
        "role": "selector-follower",
        "present": True,
    }


def test_candidates_come_from_the_hub_cache_namespace_and_named_cluster_objects() -> None:
    cache = HubCache(cast(Any, object()))
    cache.objects["ConfigMap"].cache["shop/web-config"] = _obj("web-config", BOTH)
    cache.objects["ConfigMap"].cache["elsewhere/web-config"] = _obj("web-config", BOTH)
    cache.objects["PriorityClass"].cache["high"] = {"metadata": {"name": "high"}}
    cache.objects["PriorityClass"].cache["low"] = {"metadata": {"name": "low"}}
    cache.objects["Deployment"].cache["shop/other"] = _obj("other", BOTH)
    found = along.gather(cache, DEPLOYMENT, WEB)
    assert sorted((k.key, o["metadata"]["name"]) for k, o in found) == [
        ("ConfigMap", "web-config"),
        ("PriorityClass", "high"),
    ]


def _row(location: str) -> LocationState:
    return LocationState(
        location=location,
        desired=1,
        ready=1,
        available=1,
        syncedGeneration=1,
        state="Synced",
        message="",
    )


def test_the_subresource_adds_along_to_each_row_and_a_wide_column() -> None:
    went_with = along.companions(DEPLOYMENT, WEB, OTHERS[:2])
    rows = along.by_location(["us-east", "us-west"], went_with, lambda k, o: set())
    obj = locations_sub.placement_object(WEB, [_row("us-east"), _row("us-west")], rows)
    east, west = obj["locations"]
    assert east["state"] == "Synced"  # what was there before stays as it was
    assert east["along"] == [
        {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "name": "web-config",
            "namespace": "shop",
            "role": "dependency",
            "present": False,
        }
    ]
    assert west["along"] == []
    cells = locations_sub.rows([_row("us-east"), _row("us-west")], rows)
    assert [c[-1] for c in cells] == ["configmap/web-config (absent)", "<none>"]
    wide = [c for c in locations_sub.COLUMNS if c.priority]
    assert [c.name for c in wide] == ["Along"]


def test_the_documented_schema_is_the_models() -> None:
    documented = resources._ALONG["properties"]
    model = {f.alias or name for name, f in along.Along.model_fields.items()}
    assert set(documented) == model
    assert set(resources._ALONG["required"]) == model - {"namespace"}
    roles = set(documented["role"]["enum"])
    assert roles == {str(r) for r in along.FOLLOWING}
    assert "along" in resources._PLACED_LOCATION["properties"]
    assert "along" not in resources._LOCATION_STATE["properties"]  # the view's rows: unchanged


def test_a_follower_says_where_it_went_and_what_it_left_once_per_reason() -> None:
    assert went({}, {"us-east": None}, "deployments/web") == ()  # first placement: none
    assert went({"us-east": None}, {"us-east": None}, "deployments/web") == ()
    changes = went(
        {"us-east": None, "us-west": None},
        {"us-east": None, "eu-west": None, "ap-south": None},
        "deployments/web",
    )
    assert changes == (
        (Went.FOLLOWED, "went to ap-south, eu-west with deployments/web"),
        (
            Went.LEFT,
            "left us-west: nothing it goes with runs there; still with deployments/web in "
            "ap-south, eu-west, us-east",
        ),
    )
    assert went({"us-east": None}, {}, "nothing") == (
        (Went.LEFT, "left us-east: nothing it goes with runs there"),
    )


def test_every_following_role_is_covered() -> None:
    # A new role that follows something must be taught to `companions` and to the schema.
    following = {r for r in Role if r not in (Role.WORKLOAD, Role.ASKED)}
    assert following == set(along.FOLLOWING)


class _Cache:
    def __init__(self, objects: dict[Key, Obj]) -> None:
        self.objects = objects
        self.kinds = dict(PLACED)

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)

    def list_keys(self, kind: str | None = None, namespace: str | None = None) -> list[Key]:
        return [k for k in self.objects if k.kind == kind and k.namespace == namespace]


async def test_followers_post_an_event_when_they_go_somewhere_new_or_leave() -> None:
    web = Key("Deployment", "shop", "web")
    objects = {web: _obj("web", {"eu-west": 3})}  # moved: it was in us-east
    writer = RecordingWriter()
    records = Records(touched=lambda _: None)
    follower = Follower(cast(HubCache, _Cache(objects)), records, cast(Writer, writer))
    records.use(web, frozenset({Key("ConfigMap", "shop", "web-config")}))
    config = _obj("web-config", {"us-east": None})
    await follower.users(CONFIGMAP, Key("ConfigMap", "shop", "web-config"), config)
    service = _obj("web", {"us-east": None}, spec={"selector": {"app": "web"}})
    objects[web]["spec"] = WEB["spec"]
    await follower.selector(SERVICE, Key("Service", "shop", "web"), service)
    assert writer.placements == [{"eu-west": None}, {"eu-west": None}]
    assert (
        writer.events.posted
        == [
            ("Normal", "Followed", "went to eu-west with deployments/web"),
            (
                "Normal",
                "Left",
                "left us-east: nothing it goes with runs there; still with "
                "deployments/web in eu-west",
            ),
        ]
        * 2
    )
    writer.events.posted.clear()
    again = _obj("web-config", {"eu-west": None})  # as written: nothing changes, nothing said
    await follower.users(CONFIGMAP, Key("ConfigMap", "shop", "web-config"), again)
    assert writer.events.posted == [] and len(writer.placements) == 2


async def test_users_are_known_before_anything_is_looked_at_after_a_start() -> None:
    """A dependency looked at before its users found none and was placed nowhere for a moment
    at every start (a Left Event, two hub writes): its users are read from the cache first."""
    import aiohttp

    from apiserver.kube.client import Credentials, Kube
    from apiserver.leader import Leadership
    from apiserver.locations.fleet import Fleet
    from apiserver.loops.handoff import Handoff
    from apiserver.loops.placement.loop import PlacementLoop

    hub = Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
    cache = HubCache(hub)
    cache.objects["Deployment"].cache["shop/web"] = WEB
    ingress = dict(OTHERS[7][1])
    cache.objects["Ingress"].cache["shop/front"] = ingress
    loop = PlacementLoop(
        cache, Fleet(hub, cast(aiohttp.ClientSession, None)), Handoff(), Leadership.solo()
    )
    loop._know_users()
    web, front = Key("Deployment", "shop", "web"), Key("Ingress", "shop", "front")
    assert loop.records.users == {
        Key("ConfigMap", "shop", "web-config"): {web},
        Key("ServiceAccount", "shop", "web-sa"): {web},
        Key("PriorityClass", "", "high"): {web},
        Key("Secret", "shop", "front-tls"): {front},
    }
    assert loop.records.followers == {Key("Service", "shop", "web"): {front}}


def test_an_autoscaler_goes_with_the_workload_it_scales() -> None:
    hpa = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    other = {
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}},
    }
    workload = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"template": {}}}
    went = along.companions(
        DEPLOYMENT, workload, [(HORIZONTALPODAUTOSCALER, hpa), (HORIZONTALPODAUTOSCALER, other)]
    )
    assert [obj["metadata"]["name"] for _, obj in went] == ["web"]
