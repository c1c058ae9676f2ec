"""Two admission webhooks the hub calls.

`/admission/strategy` (validating) refuses a malformed or impossible `kmc.dev/strategy` at
apply time. The placement loop is safe either way (a bad strategy changes nothing there and
says why), but `kubectl apply` is where a person is looking: the refusal names the field and
what to fix. Impossible means naming a location that does not exist. A strategy that leaves no
location eligible right now is allowed: locations come and go, and an outage must not stop
anyone from applying (the `kmc.dev/Placed` condition says what is wrong meanwhile).

`/admission/overrides` (validating) refuses a malformed `kmc.dev/overrides` the same way (an
unknown rule, more than one key in a rule, a bad JSON Patch operation or path, an unknown
variable, a bad selector), naming the field, and so a malformed `Override` or `ClusterOverride`
(the same rules under `spec.rules`, and its targets, locations and selectors). A location name
that is no Location yet is allowed: it may join later. A rule on `spec.replicas` is refused
in both: a location's share is the placement's.

`/admission/pods` (mutating) puts the scheduling gate `kmc.dev/placed-elsewhere` on a bare Pod
created in a namespace we place, so that a hub with nodes of its own never runs a Pod we run
in a location. The gate is the hub's business: the child's copy goes without it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from apiserver.api.errors import bad_request
from apiserver.contract import OVERRIDES, PLACED_ELSEWHERE, STRATEGY, never_placed
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kinds.core import bare
from apiserver.models.location import GROUP
from apiserver.models.override import CLUSTER_KIND, KIND, ClusterOverrideSpec, OverrideSpec
from apiserver.objects import Obj
from apiserver.overrides.annotation import parse_overrides
from apiserver.overrides.rules import RuleError, parse_rules
from apiserver.placement.policy import denied
from apiserver.placement.strategy import StrategyError, parse_strategy

PATH = "/admission/strategy"
PODS_PATH = "/admission/pods"
OVERRIDES_PATH = "/admission/overrides"


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, review)
    app.router.add_post(OVERRIDES_PATH, review_overrides)
    app.router.add_post(PODS_PATH, review_pod)


async def _asked(request: web.Request) -> Obj:
    try:
        asked = json.loads(await request.read())["request"]
    except (json.JSONDecodeError, KeyError, TypeError):
        asked = None
    if not isinstance(asked, dict) or "uid" not in asked:
        raise bad_request("expected an admission.k8s.io/v1 AdmissionReview")
    return asked


def _answer(asked: Obj, verdict: Obj) -> web.Response:
    return web.json_response(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": asked["uid"], **verdict},
        }
    )


async def review(request: web.Request) -> web.Response:
    asked = await _asked(request)
    cache = request.app[HUB_CACHE]
    known = set(cache.locations.cache)
    return _answer(asked, judge(asked, known, _refused_by_policy(cache, asked)))


async def review_overrides(request: web.Request) -> web.Response:
    asked = await _asked(request)
    kind = asked.get("kind") or {}
    if kind.get("group") == GROUP and kind.get("kind") in (KIND, CLUSTER_KIND):
        return _answer(asked, judge_override_object(asked))
    return _answer(asked, judge_overrides(asked))


def judge_override_object(asked: Obj) -> Obj:
    """The `response` for an Override or ClusterOverride being written, minus its uid:
    refused, naming the field, when its spec or one of its rules does not parse."""
    obj = asked.get("object") or {}
    model = ClusterOverrideSpec if obj.get("kind") == CLUSTER_KIND else OverrideSpec
    try:
        spec = model.model_validate(obj.get("spec") or {})
        parse_rules(list(spec.rules), "spec.rules")
    except ValidationError as error:
        details = error.errors()
        # A list whose one item failed is also "too short" once that item is dropped: say
        # what is wrong with the item, not that.
        named = [d for d in details if d["type"] != "too_short"] or details
        problems = "; ".join(_spec_problem(detail) for detail in named)
        return _denied(f"{_named(asked)}: {problems}. Fix it and apply again.")
    except RuleError as err:
        return _denied(f"{_named(asked)}: {err}. Fix the rule and apply again.")
    return {"allowed": True}


def _spec_problem(detail: ErrorDetails) -> str:
    """`spec.targets[0].kind: required`, as a refusal names one problem of a spec."""
    where = "spec" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}"
        for part in detail["loc"]
        if part != "[key]"
    )
    kind = detail["type"]
    if kind == "missing":
        return f"{where}: required"
    if kind == "extra_forbidden":
        return f"{where}: unknown field"
    if kind == "value_error":
        return f"{where}: {(detail.get('ctx') or {}).get('error', detail['msg'])}"
    return f"{where}: {detail['msg'][:1].lower()}{detail['msg'][1:]}"


def judge_overrides(asked: Obj) -> Obj:
    """The `response` for an object whose `kmc.dev/overrides` is new or changed, minus its
    uid: refused, naming the field, when it does not parse."""
    new = _annotation(asked.get("object"), OVERRIDES)
    if new is None or new == _annotation(asked.get("oldObject"), OVERRIDES):
        return {"allowed": True}
    try:
        parse_overrides(new)
    except RuleError as err:
        return _denied(f"{_named(asked)}: {err}. Fix the annotation and apply again.")
    return {"allowed": True}


def _named(asked: Obj) -> str:
    """`Deployment shop/web`, as a refusal names the object."""
    meta = (asked.get("object") or {}).get("metadata") or {}
    where = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"{(asked.get('kind') or {}).get('kind', 'object')} {where}"


async def review_pod(request: web.Request) -> web.Response:
    asked = await _asked(request)
    namespace = str(asked.get("namespace") or "")
    return _answer(asked, gate(asked, request.app[HUB_CACHE].namespace(namespace)))


def gate(asked: Obj, namespace: Obj) -> Obj:
    """The `response` for a Pod being created, minus its uid: allowed, with a JSON patch that
    adds our scheduling gate when the Pod is bare and its namespace is placed."""
    pod = asked.get("object")
    if not isinstance(pod, dict) or not bare(pod) or never_placed(namespace):
        return {"allowed": True}
    gates = (pod.get("spec") or {}).get("schedulingGates")
    if any(g.get("name") == PLACED_ELSEWHERE for g in gates or []):
        return {"allowed": True}
    ours = {"name": PLACED_ELSEWHERE}
    patch = (
        [{"op": "add", "path": "/spec/schedulingGates/-", "value": ours}]
        if gates
        else [{"op": "add", "path": "/spec/schedulingGates", "value": [ours]}]
    )
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
    }


def judge(asked: Obj, locations: set[str], refused: Mapping[str, str] | None = None) -> Obj:
    """The `response` of an AdmissionReview, minus its uid. `refused`: the locations the
    object's namespace may not use, with the reason (`policy NAME`)."""
    new = _annotation(asked.get("object"), STRATEGY)
    if new is None or new == _annotation(asked.get("oldObject"), STRATEGY):
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
    """Locations the PlacementPolicies of the object's namespace rule out (for a
    cluster-scoped object, those that select every namespace)."""
    namespace = asked.get("namespace") or (
        ((asked.get("object") or {}).get("metadata") or {}).get("namespace")
    )
    if not isinstance(namespace, str):
        namespace = ""
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


def _annotation(obj: Any, key: str) -> str | None:
    if not isinstance(obj, dict):
        return None
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None
