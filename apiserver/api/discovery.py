"""Discovery documents: how kubectl and the hub learn which resources we serve.

The hub's aggregator asks our `/apis` for aggregated discovery (`Accept: application/json;
g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, ...;v=v2beta1;...`) and uses the answer
only when its Content-Type names that kind (`content_type_for_aggregated`); otherwise it falls
back to `GET /apis/<group>/<version>` for each APIService and converts the APIResourceList
itself. Its availability check also GETs `/apis/<group>/<version>`, so that document must keep
answering whatever state the child clusters are in: everything here is a pure function of the
static registry.

The aggregated document is built *from* the APIResourceList, the way Kubernetes converts one
into the other, so the hub shows the same thing whichever of the two it reads. Following
Kubernetes: verbs are sorted; a sub-resource entry (`deployments/locations`) has an empty
singular name and, because its kind differs from its parent's, its own group and version; a
top-level entry leaves group and version empty (they are the list's); `storageVersionHash` is
left out because nothing of ours is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.api.registry import Resource, group_versions
from apiserver.api.table import DISCOVERY_GROUP, DISCOVERY_VERSIONS

AGGREGATED_KIND = "APIGroupDiscoveryList"


def group_list(resources: Sequence[Resource]) -> dict[str, Any]:
    """The APIGroupList of `/apis`: every group, its versions, the preferred one first."""
    groups = dict.fromkeys(group for group, _ in group_versions(resources))
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(resources, group) for group in groups],
    }


def api_group(resources: Sequence[Resource], group: str) -> dict[str, Any] | None:
    """The APIGroup of `/apis/<group>`, or None when we do not serve that group."""
    if not any(resource.group == group for resource in resources):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(resources, group)}


def resource_list(resources: Sequence[Resource], group: str, version: str) -> dict[str, Any] | None:
    """The APIResourceList of `/apis/<group>/<version>`, sub-resources included."""
    served = [r for r in resources if (r.group, r.version) == (group, version)]
    if not served:
        return None
    entries: list[dict[str, Any]] = []
    for resource in served:
        entries.append(_resource_entry(resource))
        entries.extend(
            _subresource_entry(resource, index) for index in range(len(resource.subresources))
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": served[0].group_version,
        "resources": entries,
    }


def aggregated(resources: Sequence[Resource], version: str = "v2") -> dict[str, Any]:
    """The APIGroupDiscoveryList of `/apis` (apidiscovery.k8s.io `v2` or `v2beta1`: same shape)."""
    _check(version)
    items: dict[str, list[dict[str, Any]]] = {}
    for group, group_version in group_versions(resources):
        listed = resource_list(resources, group, group_version)
        assert listed is not None  # group_versions only names what is served
        items.setdefault(group, []).append(
            {
                "version": group_version,
                "resources": _to_aggregated(listed["resources"]),
                "freshness": "Current",
            }
        )
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": [
            {"metadata": {"name": group}, "versions": versions} for group, versions in items.items()
        ],
    }


def content_type_for_aggregated(version: str = "v2") -> str:
    """The Content-Type that makes the aggregator read our `/apis` as aggregated discovery."""
    _check(version)
    return f"application/json;g={DISCOVERY_GROUP};v={version};as={AGGREGATED_KIND}"


# --- helpers -----------------------------------------------------------------------------------


def _check(version: str) -> None:
    if version not in DISCOVERY_VERSIONS:
        raise ValueError(f"aggregated discovery {version!r} is not one of {DISCOVERY_VERSIONS}")


def _group(resources: Sequence[Resource], group: str) -> dict[str, Any]:
    versions = [
        {"groupVersion": f"{group}/{version}", "version": version}
        for served_group, version in group_versions(resources)
        if served_group == group
    ]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def _resource_entry(resource: Resource) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": sorted(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def _subresource_entry(resource: Resource, index: int) -> dict[str, Any]:
    sub = resource.subresources[index]
    entry: dict[str, Any] = {
        "name": f"{resource.plural}/{sub.name}",
        "singularName": "",
        "namespaced": resource.namespaced,
    }
    if sub.kind != resource.kind:
        entry["group"] = resource.group
        entry["version"] = resource.version
    entry["kind"] = sub.kind
    entry["verbs"] = sorted(sub.verbs)
    return entry


def _to_aggregated(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """APIResourceList entries as APIResourceDiscovery, sub-resources under their parent."""
    parents: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if "/" in entry["name"]:
            continue
        parent: dict[str, Any] = {
            "resource": entry["name"],
            "responseKind": _kind_of(entry),
            "scope": "Namespaced" if entry["namespaced"] else "Cluster",
            "singularResource": entry["singularName"],
            "verbs": entry["verbs"],
        }
        for key in ("shortNames", "categories"):
            if key in entry:
                parent[key] = entry[key]
        parents[entry["name"]] = parent
    for entry in entries:
        plural, slash, name = entry["name"].partition("/")
        if slash:
            parents[plural].setdefault("subresources", []).append(
                {"subresource": name, "responseKind": _kind_of(entry), "verbs": entry["verbs"]}
            )
    return list(parents.values())


def _kind_of(entry: dict[str, Any]) -> dict[str, str]:
    return {
        "group": entry.get("group", ""),
        "version": entry.get("version", ""),
        "kind": entry["kind"],
    }
