"""The hub the sync, feed and report tests read: a hub cache whose informers are all synced
(nothing listed from a server), the Deployment shop/web and the ConfigMap shop/conf as a user
made them, put in that cache as its informers would."""

from __future__ import annotations

import json
from typing import Any, cast

import aiohttp

from apiserver.contract import PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kube.client import Credentials, Kube
from apiserver.objects import Obj


def hub_cache() -> HubCache:
    session = cast(aiohttp.ClientSession, None)
    cache = HubCache(Kube(session, Credentials("https://hub.invalid", False), "hub"))
    for informer in (
        *cache.objects.values(),
        cache.namespaces,
        cache.locations,
        cache.policies,
        cache.overrides,
        cache.cluster_overrides,
        cache.slices,
    ):
        informer.synced.set()
    cache.locations.cache["east"] = {"metadata": {"name": "east", "labels": {"region": "us"}}}
    cache.locations.cache["west"] = {"metadata": {"name": "west", "labels": {"region": "us"}}}
    cache.namespaces.cache["shop"] = {"metadata": {"name": "shop", "uid": "u-shop"}}
    return cache


def put(cache: HubCache, kind: str, obj: Obj) -> None:
    cache.objects[kind].cache[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj


def placed(placement: dict[str, Any]) -> dict[str, str]:
    """The annotations of a hub object the placement loop placed so."""
    return {PLACEMENT: json.dumps(placement)}


def web_deployment(
    annotations: dict[str, str],
    replicas: int,
    *,
    uid: str = "u-web",
    container: str = "web",
    image: str = "nginx",
    **metadata: Any,
) -> Obj:
    """The hub's Deployment shop/web: `replicas` pods of one container, with `metadata` (a
    generation, a resourceVersion) beside its name and uid, and these `annotations`."""
    meta = {"name": "web", "namespace": "shop", "uid": uid, **metadata}
    template = {"containers": [{"name": container, "image": image}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**meta, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template},
        },
    }


def conf(placement: dict[str, None]) -> Obj:
    """The hub's ConfigMap shop/conf, placed so."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "conf",
            "namespace": "shop",
            "uid": "u-conf",
            "annotations": placed(placement),
        },
        "data": {"a": "b"},
    }
