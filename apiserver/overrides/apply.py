"""Applying an ordered list of rules to one child object, for one location.

`apply_rules` is a pure function: the same object, rules, location and labels always give the
same result, the rules apply in the order given (each sees what the ones before it made),
and the input is never changed (the work is done on a deep copy). A rule that cannot apply
raises `OverrideError` naming the rule (where it was written, its index and key) and the
problem; the caller keeps the location's child as it was.

The placement owns `spec.replicas` (a location's share): a rule that would change it is
refused here, whatever its key, as well as at the door (`rules.py`). So is a rule that would
make it another object (apiVersion, kind, name, namespace).

Container rules find the pod template by the object's shape, not its kind: a Pod's own spec,
`spec.template` (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs) or
`spec.jobTemplate.spec.template` (CronJobs).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from apiserver.labels import label_value_errors
from apiserver.objects import Obj, ReadOnly
from apiserver.overrides import variables
from apiserver.overrides.jsonpatch import PatchError, apply_patch, parse_pointer
from apiserver.overrides.rules import (
    EnvRule,
    FieldRule,
    ImageRule,
    ListRule,
    MetadataRule,
    ResourcesRule,
    Rule,
    check_quantity,
)


class OverrideError(ValueError):
    """A rule that cannot apply to this object in this location."""

    def __init__(self, rule: Rule, problem: str) -> None:
        super().__init__(f"{rule.name}: {problem}")
        self.rule = rule
        self.problem = problem


class _Problem(ValueError):
    """What went wrong inside one rule; `apply_rules` names the rule."""


def apply_rules(
    obj: ReadOnly, rules: Sequence[Rule], location: str, labels: Mapping[str, str]
) -> Obj:
    """`obj` as `location` (with its Location `labels`) gets it after `rules`, in order."""
    result: Obj = copy.deepcopy(dict(obj))
    for rule in rules:
        before, identity = _replicas(result), _identity(result)
        try:
            result = _apply(result, rule, location, labels)
        except (_Problem, PatchError, variables.VariableError) as err:
            raise OverrideError(rule, str(err)) from None
        if _replicas(result) != before:
            raise OverrideError(
                rule, "it changes spec.replicas, which is the placement's (set by the strategy)"
            )
        if _identity(result) != identity:
            raise OverrideError(
                rule, "it changes which object this is (apiVersion, kind, name or namespace)"
            )
    return result


def _identity(obj: Obj) -> tuple[Any, ...]:
    metadata = obj.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace")


_ABSENT = object()


def _replicas(obj: Obj) -> Any:
    spec = obj.get("spec")
    return spec.get("replicas", _ABSENT) if isinstance(spec, dict) else _ABSENT


def _apply(obj: Obj, rule: Rule, location: str, labels: Mapping[str, str]) -> Obj:
    def fill(text: str) -> str:
        return variables.fill(text, location, labels)

    body = rule.body
    if rule.key == "patch":
        assert isinstance(body, tuple)
        filled = _filled(body, location, labels)
        result = apply_patch(obj, filled)
        if not isinstance(result, dict):
            raise _Problem("the patch must leave an object")
        return result
    if isinstance(body, FieldRule):
        _field(obj, body, _filled(body.patch, location, labels))
    elif isinstance(body, MetadataRule):
        _metadata(obj, rule.key, body, fill)
    elif isinstance(body, ImageRule):
        for container in _containers(obj, body.containers):
            container["image"] = _image(str(container.get("image", "")), body, fill)
    elif isinstance(body, EnvRule):
        for container in _containers(obj, body.containers):
            _env(container, body, fill)
    elif isinstance(body, ListRule):
        for container in _containers(obj, body.containers):
            if body.replace is not None:
                container[rule.key] = [fill(item) for item in body.replace]
            else:
                have = container.get(rule.key) or []
                container[rule.key] = [*have, *(fill(item) for item in body.append or ())]
    elif isinstance(body, ResourcesRule):
        for container in _containers(obj, body.containers):
            resources = container.setdefault("resources", {})
            for field, values in (("limits", body.limits), ("requests", body.requests)):
                for name, value in values.items():
                    filled_value = fill(value)
                    try:
                        check_quantity(filled_value, f"{field}.{name}")
                    except ValueError as err:
                        raise _Problem(str(err)) from None
                    resources.setdefault(field, {})[name] = filled_value
    return obj


def _filled(
    operations: Sequence[Mapping[str, Any]], location: str, labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """JSON Patch operations with the variables in their values filled in; paths are
    literal (a path made from a label would be a path nobody can read in the rule)."""
    return [
        {**op, "value": variables.fill_all(op["value"], location, labels)}
        if "value" in op
        else dict(op)
        for op in operations
    ]


# --- containers ---------------------------------------------------------------------------------


def _pod_template(obj: Obj) -> Obj | None:
    """The dict holding the pod's `metadata` and `spec`: the object itself for a Pod."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if isinstance(spec.get("containers"), list):
        return obj
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        return template
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = job.get("template") if isinstance(job, dict) else None
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        return template
    return None


def _containers(obj: Obj, names: Sequence[str] | None) -> list[Obj]:
    """The containers a rule applies to: those named, or every one (init containers too)."""
    template = _pod_template(obj)
    if template is None:
        raise _Problem("the object has no pod template (container rules are for workloads)")
    spec = template["spec"]
    every = [
        c
        for field in ("initContainers", "containers")
        for c in (spec.get(field) or [])
        if isinstance(c, dict)
    ]
    if names is None:
        return every
    by_name = {c.get("name"): c for c in every}
    missing = [name for name in names if name not in by_name]
    if missing:
        have = ", ".join(str(c.get("name")) for c in every) or "none"
        raise _Problem(f"no container named {', '.join(missing)} (containers: {have})")
    return [by_name[name] for name in names]


def _image(image: str, rule: ImageRule, fill: Any) -> str:
    """An image reference `[registry/]repository[:tag][@digest]` with the rule's parts."""
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    tag = ""
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
    first, _, after = rest.partition("/")
    if after and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, after
    else:
        registry, repository = "", rest
    if rule.registry is not None:
        registry = fill(rule.registry).rstrip("/")
    if rule.repository is not None:
        repository = fill(rule.repository)
    if rule.tag is not None:
        tag, digest = fill(rule.tag), ""  # a digest would win over the new tag at pull time
    if rule.digest is not None:
        digest = fill(rule.digest)
    if not repository:
        raise _Problem(f"image {image!r} has no repository to keep: write repository too")
    text = f"{registry}/{repository}" if registry else repository
    return text + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _env(container: Obj, rule: EnvRule, fill: Any) -> None:
    env = [e for e in (container.get("env") or []) if e.get("name") not in rule.remove]
    for name, value in rule.set.items():
        entry = {"name": name, "value": fill(value)}
        at = next((i for i, e in enumerate(env) if e.get("name") == name), None)
        if at is None:
            env.append(entry)
        else:
            env[at] = entry  # a valueFrom goes: the override's value is the one wanted
    if env:
        container["env"] = env
    else:
        container.pop("env", None)


# --- metadata -------------------------------------------------------------------------------


def _metadata(obj: Obj, key: str, rule: MetadataRule, fill: Any) -> None:
    if rule.on == "template":
        holder = _pod_template(obj)
        if holder is None or holder is obj:
            raise _Problem("on: template, but the object has no pod template")
    else:
        holder = obj
    metadata = holder.setdefault("metadata", {})
    values = dict(metadata.get(key) or {})
    for name in rule.remove:
        values.pop(name, None)
    for name, value in rule.set.items():
        filled = fill(value)
        if key == "labels" and (problems := label_value_errors(filled)):
            raise _Problem(f"label {name}={filled!r}: {'; '.join(problems)}")
        values[name] = filled
    if values:
        metadata[key] = values
    else:
        metadata.pop(key, None)


# --- a document inside a string field -----------------------------------------------------------


def _field(obj: Obj, rule: FieldRule, operations: list[Any]) -> None:
    """Patch the JSON or YAML document held in a string field; write it back the same way."""
    tokens = parse_pointer(rule.path)
    parent: Any = obj
    for token in tokens[:-1]:
        parent = parent.get(token) if isinstance(parent, dict) else None
    text = parent.get(tokens[-1]) if isinstance(parent, dict) else None
    if not isinstance(text, str):
        raise _Problem(f"{rule.path} is not a string field of this object")
    try:
        document, as_json = json.loads(text), True
    except json.JSONDecodeError:
        try:
            document, as_json = yaml.safe_load(text), False
        except yaml.YAMLError as err:
            raise _Problem(f"{rule.path} holds neither JSON nor YAML: {err}") from None
    if not isinstance(document, dict | list):
        raise _Problem(f"{rule.path} holds no JSON or YAML object or list")
    patched = apply_patch(document, operations)
    if as_json:
        indent = 2 if "\n" in text.strip() else None
        written = json.dumps(patched, indent=indent) + ("\n" if text.endswith("\n") else "")
    else:
        written = yaml.safe_dump(patched, sort_keys=False, default_flow_style=False)
    assert isinstance(parent, dict)
    parent[tokens[-1]] = written
