"""`PUT /apis/mc.kmc.dev/v1alpha1/locations/<name>/report`: a pull location's status report.

Its agent sends what it sees of our objects in its cluster, whole each time (a
`LocationReport`, `models/report.py`); the last one per location is kept in memory
(`locations/reports.Reports`) and read by the sync loop as it reads a pushed location's
watches. Authorized by the guard like every request: `update` on `locations/report` in
`mc.kmc.dev`, named. A Push location's children are watched, never reported: 409.
See docs/pull.md.
"""

from __future__ import annotations

import json

from aiohttp import web
from pydantic import ValidationError

from apiserver.api import errors
from apiserver.api.respond import json_response
from apiserver.contract import MC_GROUP, VERSION
from apiserver.feed.children import ReportedChildren
from apiserver.hubcache import HUB_CACHE
from apiserver.kinds import Kind
from apiserver.kube.client import ApiError
from apiserver.locations.pulledcrds import PulledCRDs
from apiserver.locations.reports import Reports, keyed
from apiserver.models.report import KIND, LocationReport
from apiserver.objects import Obj

PATH = f"/apis/{MC_GROUP}/{VERSION}/locations/{{name}}/report"
MAX_BYTES = 64 * 1024 * 1024  # a few thousand slim children take a few MiB
REPORTS = web.AppKey("reports", Reports)
PULLED_CRDS = web.AppKey("pulled crds", PulledCRDs)
REPORTED_CHILDREN = web.AppKey("reported children", ReportedChildren)


def add_routes(app: web.Application) -> None:
    app.router.add_put(PATH, report)


async def report(request: web.Request) -> web.Response:
    cache = request.app[HUB_CACHE]
    location = request.match_info["name"]
    body = await read_body(request, "report", "a LocationReport")
    try:
        parsed, slim = _validated(request.app[REPORTED_CHILDREN], location, body)
    except ValidationError as err:
        raise invalid(KIND, location, err) from None
    try:
        await pulled_only(request, location, "reports")
    except ApiError:
        request.app[REPORTED_CHILDREN].forget(location)  # nothing kept for it
        raise
    kinds = list(cache.kinds.values())
    by_type: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in kinds}
    children = keyed(slim, by_type)
    probe = parsed.probe.model_dump() if parsed.probe is not None else None
    changed = request.app[REPORTS].put(
        location, children, frozenset(parsed.namespaces), {k.key: k for k in kinds}, probe
    )
    return json_response(
        {
            "apiVersion": f"{MC_GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": location},
            "accepted": {"children": len(children), "changed": len(changed)},
            # The CRDs its probe names that the hub lacks: the agent sends them (`crds.py`).
            "missingCRDs": request.app[PULLED_CRDS].missing(location),
        }
    )


def _validated(
    memo: ReportedChildren, location: str, body: object
) -> tuple[LocationReport, list[Obj]]:
    """The report (its children left out) and its children, validated: each child only when
    it differs from the last report's (`feed/children.py`). A bad child: the whole report is
    validated again, for Kubernetes' field names of every error (`children[3].metadata…`)."""
    raw = body.get("children", []) if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(raw, list):
        return LocationReport.model_validate(body), []  # raises: not a report
    envelope = LocationReport.model_validate({**body, "children": []})
    try:
        return envelope, memo.validated(location, raw)
    except ValidationError:
        memo.forget(location)
        LocationReport.model_validate(body)  # raises, naming the field
        raise


async def pulled_only(request: web.Request, location: str, what: str) -> None:
    """404 for no such Location, 409 for a push one: `what` is for pull locations only."""
    cache = request.app[HUB_CACHE]
    await cache.wait_synced()
    if cache.locations.get(location) is None:
        raise errors.not_found("locations", MC_GROUP, location)
    if not cache.pulled(location):
        raise errors.conflict(
            f"location {location} is a push location: {what} are for pull locations "
            "(spec.mode: Pull); kmc-apiserver watches a push location's cluster itself"
        )


def invalid(kind: str, location: str, err: ValidationError) -> ApiError:
    """422 naming each bad field, as Kubernetes says it."""
    causes = [(_field(d["loc"]), d["msg"]) for d in err.errors(include_url=False)]
    return errors.invalid(kind, MC_GROUP, location, causes)


async def read_body(request: web.Request, what: str, kind: str) -> object:
    """The request's JSON body, at most `MAX_BYTES`; 400 for none, too big, or not JSON."""
    chunks, size = [], 0
    while chunk := await request.content.read(1 << 20):
        size += len(chunk)
        if size > MAX_BYTES:
            raise errors.bad_request(f"the {what} is larger than {MAX_BYTES} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        raise errors.bad_request(f"a {what} needs a body: {kind}")
    try:
        return json.loads(raw)
    except ValueError as err:
        raise errors.bad_request(f"the {what} is not JSON: {err}") from None


def _field(loc: tuple[int | str, ...]) -> str:
    """`children[0].metadata.name`, as Kubernetes names a field."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<body>"
