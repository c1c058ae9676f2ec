"""`<workload>/strategy`: the strategy in force, where it comes from, and every verdict.

Reading it answers "why is it (not) there?" location by location. Writing it (PUT, or a merge
patch) is the validated way to set the `kmc.dev/strategy` annotation: a strategy that does
not parse, or names a location that does not exist, is refused with 422 and changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from apiserver.api import errors
from apiserver.api.table import Column
from apiserver.contract import MC_GROUP, VERSION, Placement
from apiserver.kube.client import ApiError
from apiserver.loops.placement.deciding import Explanation
from apiserver.objects import Obj
from apiserver.placement.strategy import Strategy, validation_problems
from apiserver.subresources.meta import metadata_of

GROUP = MC_GROUP
API_VERSION = f"{MC_GROUP}/{VERSION}"

COLUMNS = (
    Column("Location", format="name", description="The location (a Location on the hub)."),
    Column("Eligible", description="Whether the strategy may place the object there."),
    Column("Reason", description="Why, in words."),
    Column("Placed", description="Replicas placed there now (<none> for kinds copied whole)."),
    Column("Strategy", priority=1, description="The strategy in force, as JSON."),
    Column("Source", priority=1, description="Where it comes from: object, namespace, default."),
)
MERGE_PATCHES = frozenset(
    {"application/merge-patch+json", "application/strategic-merge-patch+json"}
)


def strategy_object(hub: Obj, explanation: Explanation) -> Obj:
    strategy = explanation.strategy
    return {
        "apiVersion": API_VERSION,
        "kind": "Strategy",
        "metadata": metadata_of(hub),
        "spec": strategy.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        if strategy
        else {},
        "status": {
            "source": explanation.source,
            "verdicts": [
                {"location": v.location, "eligible": v.eligible, "reason": v.reason}
                for v in explanation.verdicts
            ],
            **({"error": explanation.error} if explanation.error else {}),
        },
    }


def rows(obj: Obj, placement: Placement) -> list[list[Any]]:
    spec_json = json.dumps(obj["spec"], separators=(",", ":"))
    status = obj["status"]
    if "error" in status:
        return [["<none>", "false", status["error"], "<none>", "<invalid>", status["source"]]]
    return [
        [
            v["location"],
            "true" if v["eligible"] else "false",
            v["reason"],
            _shown(placement.get(v["location"])) if v["location"] in placement else "-",
            spec_json,
            status["source"],
        ]
        for v in status["verdicts"]
    ]


def _shown(value: int | None) -> str:
    return "<none>" if value is None else str(value)


def desired(current: Obj, body: Any, content_type: str, method: str) -> Strategy | None:
    """The strategy a PUT or PATCH asks for (None: remove the annotation), or 4xx."""
    if method == "PATCH":
        if content_type not in MERGE_PATCHES:
            raise ApiError(
                errors.status(
                    415,
                    "UnsupportedMediaType",
                    f"the strategy sub-resource takes merge patches, not {content_type!r}: "
                    "use kubectl patch --type=merge",
                )
            )
        body = merge_patch(current, body)
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a Strategy object")
    if body.get("kind") not in (None, "Strategy"):
        raise errors.bad_request(f"expected kind Strategy, got {body.get('kind')!r}")
    spec = body.get("spec")
    if not spec:
        return None
    try:
        return Strategy.model_validate(spec)
    except ValidationError as err:
        name = current["metadata"]["name"]
        causes = [(f"spec{path}", problem) for path, problem in validation_problems(err)]
        raise errors.invalid("Strategy", GROUP, name, causes) from None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
