"""The `mc.kmc.dev` resources, with the schemas `kubectl explain` prints.

Read-only placement views of the hub's workloads, one per kind with a `view` in `kinds/`. The
view of `deployments/web` says which strategy is in force and where it came from, where the
Deployment is placed and how every location is doing; its `locations` sub-resource is that
last part alone, its `strategy` sub-resource the strategy with every location's verdict
(writable: it sets the `kmc.dev/strategy` annotation).

The descriptions are user documentation: `kubectl explain` prints them verbatim. The strategy's
shape comes from the pydantic model that parses the annotation, so the two cannot disagree; only
its field descriptions are written here.
"""

from __future__ import annotations

from typing import Any

from apiserver.api.registry import DEFS_PREFIX, Resource, Subresource, ref
from apiserver.contract import MC_GROUP as MC
from apiserver.contract import VERSION
from apiserver.kinds import VIEWS, Kind
from apiserver.placement.strategy import Strategy

READ = ("get", "list", "watch")

# Definition namespaces, named as Kubernetes names definitions of custom groups (reversed group).
KMC_TYPES = "dev.kmc.v1alpha1."  # shared kmc types: the strategy, as in the kmc.dev annotation
MC_TYPES = "dev.kmc.mc.v1alpha1."

STRATEGY = KMC_TYPES + "Strategy"
LOCATION_STATE = MC_TYPES + "LocationState"
PLACED_LOCATION = MC_TYPES + "PlacedLocation"
ALONG = MC_TYPES + "Along"
CONDITION = MC_TYPES + "Condition"
LOCATION_VERDICT = MC_TYPES + "LocationVerdict"
STRATEGY_STATUS = MC_TYPES + "StrategyStatus"


# --- the strategy, from its pydantic model -----------------------------------------------------

_STRATEGY_DOCS: dict[str, dict[str, str]] = {
    "Strategy": {
        "type": (
            "How the object is placed. Split divides the replicas across the eligible "
            "locations by weight; Replicate runs a full copy in every eligible location; "
            "Single runs everything in one location."
        ),
        "locationSelector": (
            "Only locations whose labels match may be used, for example "
            "topology.kubernetes.io/region. Unset: every location."
        ),
        "tolerations": (
            "Location taints this object tolerates, as pod tolerations do for node taints. A "
            "location with a NoSchedule or NoExecute taint that is not tolerated is not eligible."
        ),
        "spreadBy": (
            "A location label, such as topology.kubernetes.io/zone: at most one location per "
            "value of that label is used, so the object spreads across zones or regions."
        ),
        "weights": (
            'Split only. Either an object of location weights, such as {"us-east": 2} '
            '(a location not listed weighs 1), or "capacity" to weigh each location by its '
            "free CPU."
        ),
        "minPerLocation": "Split only: every location used gets at least this many replicas.",
        "maxPerLocation": (
            "Split only: no location gets more than this many replicas. Replicas that fit "
            "nowhere stay unplaced and the kmc.dev/Placed condition says so."
        ),
        "pin": "Only these locations may be used.",
        "avoid": "These locations are never used.",
        "movable": (
            "false: once placed the object is not moved by spill-over into new locations, "
            "rebalancing or missing capacity; only a lost or incompatible location, or a pin "
            "(kubectl mc move) moves it. For StatefulSets whose volumes stay where they are."
        ),
    },
    "LabelSelector": {
        "matchLabels": "Labels a location must carry, each with exactly this value.",
        "matchExpressions": "More requirements on location labels; all of them must hold.",
    },
    "LabelSelectorRequirement": {
        "key": "The location label the requirement is about.",
        "operator": (
            "In and NotIn: the label's value must (not) be one of values. Exists and "
            "DoesNotExist: the label must (not) be present."
        ),
        "values": "The values for In and NotIn; empty for Exists and DoesNotExist.",
    },
    "Toleration": {
        "key": "The taint key tolerated. Empty, with operator Exists, tolerates every taint.",
        "operator": (
            "Equal (the default): the taint's key and value must match. Exists: any value "
            "of the key."
        ),
        "value": "The taint value tolerated, with operator Equal.",
        "effect": "Only taints with this effect are tolerated. Empty: every effect.",
    },
}

# Schema keys whose value is one schema, a list of schemas, or a map of schemas.
_ONE = ("items", "not", "additionalProperties")
_MANY = ("anyOf", "oneOf", "allOf")
_MAP = ("properties", "$defs")


def _openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's JSON Schema in the registry's OpenAPI v3 dialect: `anyOf [X, null]` becomes
    a nullable X, `const` a one-value enum; titles and null defaults go."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "additionalProperties" and value is False:
            continue  # pydantic's extra="forbid"; writes are validated by the model itself
        if key == "const":
            out["enum"] = [value]
        elif key == "anyOf" and {"type": "null"} in value:
            options = [option for option in value if option != {"type": "null"}]
            out["nullable"] = True
            if len(options) == 1:
                out.update(_openapi(options[0]))
            else:
                out["anyOf"] = [_openapi(option) for option in options]
        elif key in _ONE and isinstance(value, dict):
            out[key] = _openapi(value)
        elif key in _MANY:
            out[key] = [_openapi(option) for option in value]
        elif key in _MAP:
            out[key] = {name: _openapi(sub) for name, sub in value.items()}
        else:
            out[key] = value
    return out


def _strategy_definitions() -> dict[str, dict[str, Any]]:
    raw = Strategy.model_json_schema(
        by_alias=True, ref_template=DEFS_PREFIX + KMC_TYPES + "{model}"
    )
    models = {"Strategy": {k: v for k, v in raw.items() if k != "$defs"}, **raw.get("$defs", {})}
    definitions: dict[str, dict[str, Any]] = {}
    for model, schema in models.items():
        converted = _openapi(schema)
        docs = _STRATEGY_DOCS.get(model, {})
        for field, prop in converted.get("properties", {}).items():
            if field in docs:
                prop["description"] = docs[field]
        definitions[KMC_TYPES + model] = converted
    return definitions


# --- the placement view ------------------------------------------------------------------------


def _int(description: str, fmt: str = "int32", nullable: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "format": fmt, "description": description}
    if nullable:
        schema["nullable"] = True
    return schema


def _str(description: str, *enum: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if enum:
        schema["enum"] = list(enum)
    return schema


def _time(description: str) -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "description": description}


_LOCATION_STATE: dict[str, Any] = {
    "type": "object",
    "description": (
        "How one location is doing with one hub object: what the placement gives it, what its "
        "child cluster reports, and where the handover stands."
    ),
    "required": ["location", "state"],
    "properties": {
        "location": _str("Name of the Location (the child cluster)."),
        "desired": _int(
            "Replicas the current placement gives this location; null when the location has "
            "left the placement (its child is removed once the others have taken over) and "
            "for kinds copied whole rather than divided (DaemonSet).",
            nullable=True,
        ),
        "ready": _int(
            "Ready pods the child object reports (numberReady for a DaemonSet, ready for a "
            "Job); null while there is no child object.",
            nullable=True,
        ),
        "available": _int(
            "Available pods the child object reports (numberAvailable for a DaemonSet, "
            "succeeded for a Job); null while there is no child object.",
            nullable=True,
        ),
        "syncedGeneration": _int(
            "Generation of the hub object this location has caught up with: applied there "
            "and observed by the child. Null until then.",
            fmt="int64",
            nullable=True,
        ),
        "state": _str(
            "Pending: the child object is not created yet, or has not caught up with the hub "
            "object. Synced: the child object matches the hub object and its share. Moving: "
            "the child is being scaled to its new share, new copies elsewhere first. "
            "Evacuating: the location has left the placement or is no longer eligible; its "
            "replicas move elsewhere before its child is removed. Unreachable: the child "
            "cluster does not answer; the last known numbers are shown. Waiting: a pull "
            "location whose agent has not reported to kmc-apiserver since it started (`waiting "
            "for its agent`). Incompatible: the "
            "child cluster cannot run the object as written (its API, or a field it sets, is "
            "not served there).",
            "Pending",
            "Synced",
            "Moving",
            "Evacuating",
            "Unreachable",
            "Waiting",
            "Incompatible",
        ),
        "message": _str(
            "Why the state is what it is, or the child object's own complaint (a failing "
            "rollout, a quota). Empty when all is well."
        ),
    },
}

_ALONG: dict[str, Any] = {
    "type": "object",
    "description": (
        "An object that went to this location with the workload: the configuration, "
        "credentials, service account, claims or priority class its pod template names, "
        "a Service whose "
        "selector matches its pods, what follows those (an Ingress), or its namespace's "
        "policy (Role, RoleBinding, NetworkPolicy, LimitRange, ResourceQuota)."
    ),
    "required": ["kind", "apiVersion", "name", "role", "present"],
    "properties": {
        "kind": _str("Its kind."),
        "apiVersion": _str("Its apiVersion."),
        "name": _str("Its name."),
        "namespace": _str("Its namespace; absent for a cluster-scoped object."),
        "role": _str(
            "How it follows: dependency (the pod template names it), selector-follower (its "
            "selector matches the pods), reference-follower (it names something that went "
            "with the workload), namespace-follower (it goes wherever its namespace's "
            "workloads run), scaler (an autoscaler of the workload).",
            "dependency",
            "selector-follower",
            "reference-follower",
            "namespace-follower",
            "scaler",
        ),
        "present": {
            "type": "boolean",
            "description": (
                "Whether the child cluster holds kmc's copy of it, as kmc-apiserver's watch of "
                "that cluster last saw (no request to the child is made to answer)."
            ),
        },
    },
}

_PLACED_LOCATION: dict[str, Any] = {
    **_LOCATION_STATE,
    "required": _LOCATION_STATE["required"],
    "properties": {
        **_LOCATION_STATE["properties"],
        "along": {
            "type": "array",
            "description": (
                "The objects placed in this location because the workload is there, by kind "
                "and name."
            ),
            "items": ref(ALONG),
        },
        "overrides": {
            "type": "array",
            "description": (
                "The overrides that apply to the workload in this location, in the order they "
                "apply: ClusterOverrides, the namespace's Overrides, then its own "
                "kmc.dev/overrides annotation."
            ),
            "items": {"type": "string"},
        },
    },
}

_CONDITION: dict[str, Any] = {
    "type": "object",
    "description": (
        "A condition of the hub object, as in its status: the workload's own (such as "
        "Available, Progressing or Complete, folded from every location) and kmc's "
        "kmc.dev/Placed and kmc.dev/Synced."
    ),
    "required": ["type", "status"],
    "properties": {
        "type": _str("Type of the condition, such as Available or kmc.dev/Placed."),
        "status": _str("Whether the condition holds.", "True", "False", "Unknown"),
        "reason": _str("One-word CamelCase reason for the last transition."),
        "message": _str("Human-readable details of the last transition."),
        "lastTransitionTime": _time("When the status last changed."),
        "lastUpdateTime": _time("When the condition was last updated."),
    },
}

_LOCATION_VERDICT: dict[str, Any] = {
    "type": "object",
    "description": "Whether one location may run the object under its strategy, and why.",
    "required": ["location", "eligible"],
    "properties": {
        "location": _str("Name of the Location (the child cluster)."),
        "eligible": {
            "type": "boolean",
            "description": "True when the strategy may place the object in this location.",
        },
        "reason": _str(
            'Why, in words: "eligible", or what rules the location out, such as "filtered by '
            'selector", a taint not tolerated, an API or field not served there, "cordoned", '
            '"not Ready for 2m", "avoided" or "not pinned".'
        ),
    },
}

_SOURCE_DOC = (
    "Where the strategy in force comes from: object (the kmc.dev/strategy annotation of the "
    "object), namespace (the annotation of its Namespace) or default (no annotation: Split "
    "for kinds with replicas, Replicate for the others)."
)
_SOURCES = ("object", "namespace", "default")

_STRATEGY_STATUS: dict[str, Any] = {
    "type": "object",
    "description": "Where the strategy comes from and what it makes of every location.",
    "properties": {
        "source": _str(_SOURCE_DOC, *_SOURCES),
        "verdicts": {
            "type": "array",
            "description": "One verdict per known location.",
            "items": ref(LOCATION_VERDICT),
        },
    },
}

_STRATEGY_DEFINITIONS = _strategy_definitions()

_LOCATIONS_DOC = (
    "One entry per location the object is placed in or still has a child object in (a "
    "location it is leaving)."
)

PLACEMENT = Subresource(
    name="locations",
    kind="Placement",
    verbs=("get",),
    description=(
        "Where one hub workload runs, location by location: what each is given, what each "
        "reports, and the state of each. Read with kubectl get <resource>.mc.kmc.dev NAME "
        "--subresource locations (kubectl 1.32 or later), or kubectl mc get."
    ),
    schema={
        "type": "object",
        "properties": {
            "locations": {
                "type": "array",
                "description": _LOCATIONS_DOC,
                "items": ref(PLACED_LOCATION),
            }
        },
        "$defs": {PLACED_LOCATION: _PLACED_LOCATION, ALONG: _ALONG},
    },
)

STRATEGY_SUBRESOURCE = Subresource(
    name="strategy",
    kind="Strategy",
    verbs=("get", "patch", "update"),
    description=(
        "The placement strategy in force for one hub workload, where it comes from, and the "
        "verdict on every location. Writing spec (PUT or PATCH) sets the object's "
        "kmc.dev/strategy annotation."
    ),
    schema={
        "type": "object",
        "properties": {
            "spec": ref(
                STRATEGY,
                "The strategy in force. Written back, it becomes the object's kmc.dev/strategy "
                "annotation.",
            ),
            "status": ref(STRATEGY_STATUS, "Where the strategy comes from, and its verdicts."),
        },
        "$defs": {
            **_STRATEGY_DEFINITIONS,
            STRATEGY_STATUS: _STRATEGY_STATUS,
            LOCATION_VERDICT: _LOCATION_VERDICT,
        },
    },
)


CHILDREN = Subresource(
    name="children",
    kind="Children",
    verbs=("get",),
    description=(
        "What each location of one hub workload's placement gets, computed as the sync loop "
        "computes it (its share, its kmc.dev/overrides, its namespace's PlacementPolicy "
        "constraints), beside the hub object as a location gets it with none of that. "
        "kubectl mc diff shows the difference. Read-only."
    ),
    schema={
        "type": "object",
        "properties": {
            "locations": {
                "type": "array",
                "description": "One entry per location of the object's placement.",
                "items": {
                    "type": "object",
                    "required": ["location", "hub"],
                    "properties": {
                        "location": _str("Name of the Location (the child cluster)."),
                        "hub": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "description": "The hub object as a location gets it, without "
                            "its share, overrides or constraints.",
                        },
                        "object": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "description": "The child object the sync loop applies there.",
                        },
                        "rules": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "The override rules that apply there, in order, "
                            'each named where it is written: kmc.dev/overrides["us-west"][0] '
                            "(env).",
                        },
                        "error": _str(
                            "Why the location's overrides do not apply (its child is left as "
                            "it was); object is absent then."
                        ),
                    },
                },
            }
        },
    },
)


def _workload(entry: Kind) -> Resource:
    assert entry.view is not None
    plural, kind, replicas_doc = entry.plural, entry.kind, entry.view.replicas_doc
    counters = {field: _int(doc) for field, doc in entry.view.counter_docs.items()}
    spec_name, status_name = f"{MC_TYPES}{kind}Spec", f"{MC_TYPES}{kind}Status"
    spec_properties: dict[str, Any] = {}
    if replicas_doc is not None:
        spec_properties["replicas"] = _int(replicas_doc)
    spec_properties["strategy"] = ref(
        STRATEGY,
        "The strategy in force: the object's kmc.dev/strategy annotation, else its "
        "namespace's, else the default. Absent while the annotation in force is invalid "
        "(the kmc.dev/Placed condition says why). Change it with the strategy sub-resource.",
    )
    spec_properties["strategySource"] = _str(_SOURCE_DOC, *_SOURCES)
    spec = {
        "type": "object",
        "description": f"How the hub {kind} is to be placed.",
        "properties": spec_properties,
    }
    status = {
        "type": "object",
        "description": f"Where the hub {kind} is placed and how its locations are doing.",
        "properties": {
            "placement": {
                "type": "object",
                "description": (
                    "The placement decided for the object (its kmc.dev/placement annotation): "
                    "replicas per location name, null for kinds copied whole."
                ),
                "additionalProperties": {"type": "integer", "format": "int32", "nullable": True},
            },
            "locations": {
                "type": "array",
                "description": _LOCATIONS_DOC,
                "items": ref(LOCATION_STATE),
            },
            **counters,
            "conditions": {
                "type": "array",
                "description": (
                    "Conditions of the hub object, kmc.dev/Placed and kmc.dev/Synced included."
                ),
                "items": ref(CONDITION),
            },
        },
    }
    return Resource(
        group=MC,
        version=VERSION,
        plural=plural,
        singular=entry.view.singular,
        kind=kind,
        namespaced=True,
        verbs=READ,
        short_names=entry.view.short_names,
        categories=("kmc",),
        subresources=(PLACEMENT, STRATEGY_SUBRESOURCE, CHILDREN),
        description=(
            f"Where a hub {kind} runs: a read-only view of the {kind} of the same namespace "
            "and name on the hub. spec shows the strategy in force and where it comes from; "
            "status the placement decided, every location's state, and counters summed over "
            "locations. The locations and strategy sub-resources show the same per location; "
            "strategy is also how the strategy is changed."
        ),
        schema={
            "type": "object",
            "properties": {
                "spec": ref(spec_name, f"How the hub {kind} is to be placed."),
                "status": ref(status_name, f"Where the hub {kind} is placed and how it is doing."),
            },
            "$defs": {
                spec_name: spec,
                status_name: status,
                LOCATION_STATE: _LOCATION_STATE,
                CONDITION: _CONDITION,
                **_STRATEGY_DEFINITIONS,
            },
        },
    )


RESOURCES: tuple[Resource, ...] = tuple(_workload(kind) for kind in VIEWS.values())
