"""Negotiate one imported group/resource: which locations take part, which versions the hub
serves, the schema of each, and a verdict per location. Pure: CRDs in, a Decision out.

- The locations that serve the kind are taken in name order; each joins while the CRDs still
  agree on identity (scope, kind and names), share a served version, and leave a common schema
  (`schema.common`). One that does not is `Incompatible`, with the paths that disagree.
- Versions: those served by every participant; the storage version stays the hub's while it is
  still served, else the highest by Kubernetes' version order (v2 > v1 > v1beta2 > v1alpha1).
- While the hub holds no objects of the kind, the schema is simply the common subset. Once it
  does (`locked`), the schema never shrinks (policy `Exclude`): each location is judged against
  the hub's CRD, one that would narrow it is `Incompatible` and takes no part; the schema may
  still grow when every compatible participant gains a field.
- Policy `Narrow` asks for the common subset of every location even when objects exist; the
  loop takes it only when `misfits` finds no hub object that the narrower schema would refuse
  or prune.
- A hub CRD the user installed (no `kmc.dev/imported` label) is never written: the locations
  are only judged against it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from apiserver.imports.schema import Schema, canonical, common, narrowed
from apiserver.imports.validate import errors
from apiserver.objects import Obj


class State(StrEnum):
    COMPATIBLE = "Compatible"
    INCOMPATIBLE = "Incompatible"
    MISSING = "Missing"


@dataclass(frozen=True)
class Verdict:
    state: State
    digest: str = ""
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    spec: Obj | None
    """The hub CRD's spec to keep (None: nothing to write)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    versions: tuple[str, ...] = ()
    storage: str | None = None


def digest(crd: Obj) -> str:
    """A stable hash of what a CRD says about the API (not its metadata or status)."""
    spec = crd.get("spec") or {}
    versions = [
        {k: v.get(k) for k in ("name", "served", "schema", "subresources")}
        for v in sorted(spec.get("versions") or [], key=lambda v: str(v.get("name")))
    ]
    body = {k: spec.get(k) for k in ("group", "names", "scope")} | {"versions": versions}
    return "sha256:" + hashlib.sha256(canonical(body).encode()).hexdigest()[:16]


def identity(crd: Obj) -> tuple[Any, ...]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    return (spec.get("group"), spec.get("scope"), names.get("kind"), names.get("plural"))


def served(crd: Obj) -> dict[str, Schema]:
    """Served version -> its openAPIV3Schema (an untyped object when it has none)."""
    out = {}
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("served"):
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            out[version["name"]] = schema or {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            }
    return out


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_order(name: str) -> tuple[int, int, int, str]:
    """Kubernetes' priority: GA > beta > alpha, then higher numbers; others last by name."""
    match = _VERSION.match(name)
    if match is None:
        return (0, 0, 0, name)
    stage = {"alpha": 1, "beta": 2, None: 3}[match.group(2)]
    return (1, stage, int(match.group(1)) * 1000 + int(match.group(3) or 0), name)


def negotiate(
    crds: Mapping[str, Obj | None], hub: Obj | None, owned: bool, locked: bool
) -> Decision:
    """`crds`: each selected location's CRD for the kind (None: it does not serve it);
    `hub`: the hub's CRD, `owned` when kmc created it; `locked` when hub objects exist."""
    verdicts: dict[str, Verdict] = {}
    present = {name: crd for name, crd in sorted(crds.items()) if crd is not None}
    for name in crds:
        if crds[name] is None:
            verdicts[name] = Verdict(State.MISSING)
    if hub is not None and (not owned or locked):
        for name, crd in present.items():
            paths = judge(hub, crd)
            state = State.INCOMPATIBLE if paths else State.COMPATIBLE
            verdicts[name] = Verdict(state, digest(crd), tuple(paths))
        if not owned:
            return Decision(None, verdicts, tuple(sorted(served(hub), key=version_order)))
        fitting = [crd for name, crd in present.items() if verdicts[name].state == State.COMPATIBLE]
        grown = build(fitting, hub)
        if grown is None or judge(hub, {"spec": grown}):
            grown = hub["spec"]  # it would shrink: keep what objects were written against
        return _decision(grown, verdicts)
    participants: list[Obj] = []
    spec: Obj | None = None
    for name, crd in present.items():
        attempt = build([*participants, crd], hub)
        if attempt is None:
            reason = judge({"spec": spec}, crd) if spec is not None else ["."]
            verdicts[name] = Verdict(State.INCOMPATIBLE, digest(crd), tuple(reason or ["."]))
            continue
        participants.append(crd)
        spec = attempt
        verdicts[name] = Verdict(State.COMPATIBLE, digest(crd))
    if spec is None:
        return Decision(None, verdicts)
    return _decision(spec, verdicts)


def misfits(objects: list[Obj], current: Obj, candidate: Obj) -> list[str]:
    """Hub objects (`namespace/name (version: path: reason)`) that the hub CRD spec `current`
    accepts and `candidate` would refuse or prune, judged in every version both serve."""
    now, after = served({"spec": current}), served({"spec": candidate})
    found: list[str] = []
    for obj in sorted(objects, key=_where):
        reasons: list[str] = []
        for version in sorted(set(now) & set(after), key=version_order):
            accepted = set(errors(now[version], obj))
            refused = [e for e in errors(after[version], obj) if e not in accepted]
            reasons.extend(f"{version}: {e}" for e in refused)
        if reasons:
            found.append(f"{_where(obj)} ({'; '.join(reasons)})")
    return found


def _where(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _decision(spec: Obj, verdicts: dict[str, Verdict]) -> Decision:
    versions = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), None)
    return Decision(spec, verdicts, tuple(sorted(versions, key=version_order)), storage)


def judge(hub: Obj, crd: Obj) -> list[str]:
    """Paths where the location's CRD would refuse or prune what the hub's accepts."""
    if identity(hub) != identity(crd):
        ours, theirs = identity(hub), identity(crd)
        labels = ("spec.group", "spec.scope", "spec.names.kind", "spec.names.plural")
        return [
            f"{label}: {a} != {b}"
            for label, a, b in zip(labels, ours, theirs, strict=True)
            if a != b
        ]
    mine, yours = served(hub), served(crd)
    paths = []
    for version in sorted(mine, key=version_order):
        if version not in yours:
            paths.append(f"{version}: not served")
            continue
        paths.extend(f"{version}: {p}" for p in narrowed(mine[version], yours[version]))
    return paths


def build(crds: list[Obj], hub: Obj | None) -> Obj | None:
    """The hub CRD spec that every one of `crds` honours; None when they share nothing."""
    if not crds:
        return None
    first = crds[0]["spec"]
    if len({identity(c) for c in crds}) != 1:
        return None
    by_crd = [served(c) for c in crds]
    names = set(by_crd[0]).intersection(*by_crd[1:])
    versions: list[Obj] = []
    for name in sorted(names, key=version_order, reverse=True):
        schema = common([s[name] for s in by_crd])
        if schema is None:
            continue
        raw = [_version(c, name) for c in crds]
        version: Obj = {"name": name, "served": True, "storage": False}
        version["schema"] = {"openAPIV3Schema": schema}
        subresources = _subresources(raw)
        if subresources:
            version["subresources"] = subresources
        if raw[0].get("additionalPrinterColumns"):
            version["additionalPrinterColumns"] = raw[0]["additionalPrinterColumns"]
        versions.append(version)
    if not versions:
        return None
    kept = {v["name"] for v in versions}
    current = _storage(hub)
    storage = current if current in kept else versions[0]["name"]
    for version in versions:
        version["storage"] = version["name"] == storage
    names_ = dict(first["names"])
    for key in ("shortNames", "categories"):
        lists = [set((c["spec"].get("names") or {}).get(key) or []) for c in crds]
        shared = sorted(set.intersection(*lists))
        if shared:
            names_[key] = shared
        else:
            names_.pop(key, None)
    return {
        "group": first["group"],
        "names": names_,
        "scope": first["scope"],
        "versions": versions,
    }


def _version(crd: Obj, name: str) -> Obj:
    versions = (crd.get("spec") or {}).get("versions") or []
    return next((v for v in versions if v.get("name") == name), {})


def _subresources(raw: list[Obj]) -> Obj:
    out: Obj = {}
    subs = [v.get("subresources") or {} for v in raw]
    if all("status" in s for s in subs):
        out["status"] = {}
    scales = {canonical(s.get("scale")) for s in subs}
    if len(scales) == 1 and subs[0].get("scale"):
        out["scale"] = subs[0]["scale"]
    return out


def _storage(hub: Obj | None) -> str | None:
    if hub is None:
        return None
    versions = (hub.get("spec") or {}).get("versions") or []
    return next((v["name"] for v in versions if v.get("storage")), None)
