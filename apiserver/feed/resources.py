"""`workfeeds.mc.kmc.dev`: the work feed of each location, as discovery and OpenAPI show it.

The feed is a resource of its own (cluster-scoped, one per Location, named like it) rather
than a sub-resource of a location because only then is its watch a real `watch`:
`GET …/workfeeds?watch=1&fieldSelector=metadata.name=<location>` is verb `watch` to the hub's
request-info (the name set from the field selector, so RBAC `resourceNames` still decide),
and the hub's aggregator keeps a watch open past its 60 s request timeout, which it applies
to a `get` of a sub-resource. Its verbs are `list` and `watch` only, and both read one
location at a time; what they carry is that location's child objects (`feed/handlers.py`).

Why `workfeeds`: it is what docs/pull.md has always called it (the work feed), and unlike
`works` it is not ambiguous with Karmada's `works.work.karmada.io` on a hub that has both; a
sub-resource of `locations` would not do (above), and `locations` itself is `kmc.dev`'s.
"""

from __future__ import annotations

from apiserver.api.registry import Resource
from apiserver.contract import MC_GROUP, VERSION

PLURAL = "workfeeds"
KIND = "WorkFeed"

WORKFEEDS = Resource(
    group=MC_GROUP,
    version=VERSION,
    plural=PLURAL,
    singular="workfeed",
    kind=KIND,
    namespaced=False,
    verbs=("list", "watch"),
    description=(
        "The work feed of a pull location: the child objects the location should hold now, "
        "computed by kmc-apiserver from the hub and never stored. One per Location, named like "
        "it. It is read only as a list or a watch of one name "
        "(fieldSelector=metadata.name=<location>): the list's items, and the watch's events, "
        "are the child objects themselves (any kind, namespaces first), not WorkFeed objects; a "
        "watch starts with the whole feed and a BOOKMARK annotated k8s.io/initial-events-end. "
        "This is what a pull location's kmc-agent watches; get, and a list or watch of no "
        "single name, are refused."
    ),
)

RESOURCES: tuple[Resource, ...] = (WORKFEEDS,)
