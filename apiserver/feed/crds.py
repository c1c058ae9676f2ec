"""`PUT /apis/mc.kmc.dev/v1alpha1/locations/<name>/crds`: CRDs a pull location serves.

Its agent sends the CRDs whose digests the hub said it lacks (`missingCRDs` in the report's
answer, `feed/report.py`), as a `LocationCRDs` (`models/report.py`); the hub keeps those its
last probe names, by digest, in memory (`locations/pulledcrds.PulledCRDs`), where API import
reads them through `LocationLoop.crds`. Authorized by the guard like every request: `update`
on `locations/crds` in `mc.kmc.dev`, named. See docs/pull.md.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import ValidationError

from apiserver.api.respond import json_response
from apiserver.contract import MC_GROUP, VERSION
from apiserver.feed.report import PULLED_CRDS, invalid, pulled_only, read_body
from apiserver.models.report import CRDS_KIND, LocationCRDs

PATH = f"/apis/{MC_GROUP}/{VERSION}/locations/{{name}}/crds"


def add_routes(app: web.Application) -> None:
    app.router.add_put(PATH, crds)


async def crds(request: web.Request) -> web.Response:
    location = request.match_info["name"]
    body = await read_body(request, "list of CRDs", "a LocationCRDs")
    try:
        LocationCRDs.model_validate(body)
    except ValidationError as err:
        raise invalid(CRDS_KIND, location, err) from None
    await pulled_only(request, location, "CRDs")
    items = body.get("items") or [] if isinstance(body, dict) else []  # checked above
    store = request.app[PULLED_CRDS]
    kept, ignored = store.put(location, list(items))
    return json_response(
        {
            "apiVersion": f"{MC_GROUP}/{VERSION}",
            "kind": CRDS_KIND,
            "metadata": {"name": location},
            "accepted": {"kept": kept, "ignored": ignored},
            "missingCRDs": store.missing(location),
        }
    )
