"""A validating webhook: refuse a malformed or impossible `kmc.dev/strategy` at apply time.

The placement loop is safe either way (a bad strategy changes nothing there and says why),
but `kubectl apply` is where a person is looking: the refusal names the field and what to
fix. Impossible means naming a location that does not exist. A strategy that leaves no
location eligible right now is allowed: locations come and go, and an outage must not stop
anyone from applying (the `kmc.dev/Placed` condition says what is wrong meanwhile).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from apiserver.api.errors import bad_request
from apiserver.contract import STRATEGY
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.objects import Obj
from apiserver.placement.policy import denied
from apiserver.placement.strategy import StrategyError, parse_strategy

PATH = "/admission/strategy"


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, review)


async def review(request: web.Request) -> web.Response:
    try:
        body = json.loads(await request.read())
        asked = body["request"]
        uid = asked["uid"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise bad_request("expected an admission.k8s.io/v1 AdmissionReview") from None
    cache = request.app[HUB_CACHE]
    known = set(cache.locations.cache)
    verdict = judge(asked, known, _refused_by_policy(cache, asked))
    return web.json_response(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, **verdict},
        }
    )


def judge(asked: Obj, locations: set[str], refused: Mapping[str, str] | None = None) -> Obj:
    """The `response` of an AdmissionReview, minus its uid. `refused`: the locations the
    object's namespace may not use, with the reason (`policy NAME`)."""
    new = _annotation(asked.get("object"))
    if new is None or new == _annotation(asked.get("oldObject")):
        return {"allowed": True}  # nothing to judge, or a strategy that is already there
    obj = asked.get("object") or {}
    meta = obj.get("metadata") or {}
    where = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
    kind = (asked.get("kind") or {}).get("kind", "object")
    try:
        strategy = parse_strategy(new, f"{kind} {where}")
    except StrategyError as err:
        return _denied(f"{err}. Fix the annotation and apply again.")
    weighted = strategy.weights if isinstance(strategy.weights, dict) else {}
    unknown = sorted({*strategy.pin, *strategy.avoid, *weighted} - locations)
    if unknown:
        return _denied(
            f"{STRATEGY} on {kind} {where}: no location named {', '.join(unknown)} "
            f"(locations: {', '.join(sorted(locations)) or 'none yet'})"
        )
    pinned = [name for name in strategy.pin if name in (refused or {})]
    if pinned:
        why = "; ".join(f"{name}: {(refused or {})[name]}" for name in pinned)
        return _denied(f"{STRATEGY} on {kind} {where}: pins a location it may not use: {why}")
    return {"allowed": True}


def _refused_by_policy(cache: HubCache, asked: Obj) -> dict[str, str]:
    """Locations the PlacementPolicies of the object's namespace rule out."""
    namespace = asked.get("namespace") or (
        ((asked.get("object") or {}).get("metadata") or {}).get("namespace")
    )
    if not isinstance(namespace, str) or not namespace:
        return {}
    policies = cache.policies_for(namespace)
    if not policies:
        return {}
    labels = {
        name: location["metadata"].get("labels") or {}
        for name, location in cache.locations.cache.items()
    }
    return denied(policies, labels)


def _denied(message: str) -> Obj:
    return {
        "allowed": False,
        "status": {"code": 422, "reason": "Invalid", "message": message},
    }


def _annotation(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(STRATEGY)
    return value if isinstance(value, str) else None
