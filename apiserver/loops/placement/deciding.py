"""Everything a placement decision reads besides the object: its strategy in force, one
`Candidate` per Location, and what an administrator's policies deny.

The placement loop decides with it and the `mc.kmc.dev` views explain with it (`explain`,
`strategy_of`), so a view says what deciding would say. The loop decides for every object
against the same locations, so what is built per Location version, per strategy text and per
schema is kept: the same inputs give the same objects, and the engine remembers its verdicts
per object.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from aiohttp import web

from apiserver.contract import STRATEGY, Placement, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import BUILT_IN_APIS, Kind
from apiserver.locations.fleet import Fleet
from apiserver.loops.placement.schemas import SchemaCache
from apiserver.models.location import Location
from apiserver.objects import Obj
from apiserver.placement import engine
from apiserver.placement.policy import denied
from apiserver.placement.strategy import (
    Strategy,
    StrategyError,
    StrategyType,
    effective_strategy,
)
from apiserver.quantity import parse_quantity

_STRATEGIES_KEPT = 4096
# (the object's annotation, its namespace's, the kind's default type)
_Texts = tuple[str | None, str | None, StrategyType]


@dataclass(frozen=True)
class Explanation:
    """Why an object is placed where it is: see `Decider.explain`."""

    strategy: Strategy | None
    source: str  # "object", "namespace" or "default"
    verdicts: tuple[engine.Verdict, ...]
    error: str | None
    unknown: tuple[str, ...]  # locations the strategy names that do not exist
    # What deciding would place now (the current placement when it cannot place), and why
    # it cannot; `kubectl mc diff -f` shows the children of an object not yet created.
    placement: Placement = field(default_factory=dict)
    unplaceable: str | None = None


class Decider:
    def __init__(self, cache: HubCache, fleet: Fleet, settings: engine.Settings) -> None:
        self.cache = cache
        self.settings = settings
        self.schemas = SchemaCache(fleet)
        # location -> group/version/Kind an API import found Incompatible there: not served.
        self.excluded: dict[str, frozenset[str]] = {}
        self._models: dict[str, tuple[str, Location]] = {}  # name -> (version, validated)
        # (location, apiVersion/kind) -> (Location version, schema, Candidate)
        self._candidates: dict[tuple[str, str], tuple[Any, Any, engine.Candidate]] = {}
        self._strategies: dict[_Texts, tuple[Strategy, str]] = {}

    def strategy(self, kind: Kind, obj: Obj, ns: Obj) -> tuple[Strategy, str]:
        """The strategy in force and its source; StrategyError when it does not parse. The
        same texts give the same Strategy object, parsed once: the engine remembers its
        verdicts per strategy object."""
        meta = obj["metadata"]
        texts: _Texts = (
            (meta.get("annotations") or {}).get(STRATEGY),
            (ns["metadata"].get("annotations") or {}).get(STRATEGY),
            kind.default_type,
        )
        known = self._strategies.get(texts)
        if known is None:
            where = f"{kind.plural} {_named(meta)}"
            known = effective_strategy(*texts, where)
            if len(self._strategies) >= _STRATEGIES_KEPT:
                self._strategies.clear()
            self._strategies[texts] = known  # an error names the object: not kept
        return known

    def strategy_of(self, kind: Kind, obj: Obj) -> tuple[Strategy | None, str, str | None]:
        """The strategy in force for a hub object, its source, and the error if it does not
        parse; cheap (no decision), for listings."""
        ns = self.cache.namespace(obj["metadata"].get("namespace") or "")
        try:
            strategy, source = self.strategy(kind, obj, ns)
        except StrategyError as err:
            return None, "", str(err)
        return strategy, source, None

    async def candidates(self, obj: Obj) -> list[engine.Candidate]:
        """Every Location as the engine sees it for this object's kind."""
        return [await self._candidate(loc, obj) for loc in self.cache.locations.items()]

    def denied(self, namespace: str, candidates: list[engine.Candidate]) -> dict[str, str]:
        """Locations the namespace's PlacementPolicies rule out, with `policy NAME` (for ""
        — a cluster-scoped object —, the policies that select every namespace)."""
        policies = self.cache.policies_for(namespace)
        return denied(policies, {c.name: c.labels for c in candidates}) if policies else {}

    async def explain(self, kind: Kind, obj: Obj, annotation: str | None = None) -> Explanation:
        """What deciding would say of a hub object now, writing nothing: the effective
        strategy (with `annotation` in place of the object's own, when given), its source, and
        every location's verdict. A strategy that does not parse is in `error`."""
        obj = kind.typed(obj)
        if annotation is not None:
            meta = obj["metadata"] = dict(obj["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), STRATEGY: annotation}
        namespace = obj["metadata"].get("namespace") or ""
        ns = self.cache.namespace(namespace)
        try:
            strategy, source = self.strategy(kind, obj, ns)
        except StrategyError as err:
            return Explanation(None, "", (), str(err), ())
        candidates = await self.candidates(obj)
        decision = engine.decide(
            obj,
            kind.shape(obj),
            strategy,
            candidates,
            read_placement(obj),
            time.time(),
            self.settings,
            denied=self.denied(namespace, candidates),
        )
        unknown = unknown_locations(strategy, candidates)
        return Explanation(
            strategy,
            source,
            decision.verdicts,
            None,
            unknown,
            dict(decision.placement),
            decision.unplaceable,
        )

    def unserved(self, kind: Kind, placement: Placement) -> list[str]:
        """The locations of `placement` whose probe says they do not serve `kind`, or where
        the API import found it Incompatible. Only kinds served by CRDs are asked: every
        location serves the built-in ones. A pushed location not probed yet is not judged; a
        pull location whose agent has not reported its probe serves the built-in kinds only,
        as placement reads it (`_served`)."""
        if not kind.crd:
            return []
        api_key = f"{kind.api_version}/{kind.kind}"
        unserved = []
        for name in placement:
            raw = self.cache.locations.get(name)
            served = _served(self._model(raw)) if raw is not None else frozenset()
            if served and api_key not in served - self.excluded.get(name, frozenset()):
                unserved.append(name)
        return unserved

    def _model(self, raw: Obj) -> Location:
        """The Location as our model, validated once per resourceVersion (every decision
        reads every Location)."""
        meta = raw["metadata"]
        version = str(meta.get("resourceVersion", ""))
        known = self._models.get(meta["name"])
        if known is None or known[0] != version:
            known = self._models[meta["name"]] = (version, Location.model_validate(raw))
        return known[1]

    async def _candidate(self, raw: Obj, obj: Obj) -> engine.Candidate:
        location = self._model(raw)
        status = location.status
        ready = status.condition("Ready")
        schemas: dict[str, engine.FieldChecker] = {}
        api_key = f"{obj['apiVersion']}/{obj['kind']}"
        checker = None
        if ready and ready.status == "True" and status.kubernetes_version:
            checker = await self.schemas.checker(
                location.name, status.kubernetes_version, obj["apiVersion"], obj["kind"]
            )
            if checker is not None:
                schemas[api_key] = checker
        # The same Location version and schema give the same Candidate object: the engine
        # remembers its verdicts per candidate object.
        excluded = self.excluded.get(location.name, frozenset())
        version = (raw["metadata"].get("resourceVersion"), excluded)
        known = self._candidates.get((location.name, api_key))
        if known is not None and known[0] == version and known[1] is checker:
            return known[2]
        candidate = engine.Candidate(
            name=location.name,
            labels=location.labels,
            taints=tuple(engine.Taint(t.key, t.value, t.effect) for t in location.spec.taints),
            unschedulable=location.spec.unschedulable,
            ready=bool(ready and ready.status == "True"),
            ready_changed_at=_changed_at(ready.last_transition_time if ready else None),
            served=_served(location) - excluded,
            schemas=schemas,
            free=_free(status.allocatable, status.requested),
        )
        self._candidates[(location.name, api_key)] = (version, checker, candidate)
        return candidate


def _served(location: Location) -> frozenset[str]:
    """What a location serves, as its probe found. Nobody on the hub side probes a pull
    location: until its agent reports its probe, it serves the built-in kinds."""
    served = frozenset(location.status.resources)
    if not served and location.pulled:
        return BUILT_IN_APIS
    return served


def unknown_locations(strategy: Strategy, candidates: list[engine.Candidate]) -> tuple[str, ...]:
    """The locations a strategy names (pin, avoid, weights) that do not exist, sorted."""
    weighted = strategy.weights if isinstance(strategy.weights, dict) else {}
    named = {*strategy.pin, *strategy.avoid, *weighted}
    return tuple(sorted(named - {c.name for c in candidates}))


def unplaceable_message(
    strategy: Strategy, candidates: list[engine.Candidate], unplaceable: str
) -> str:
    """Why nothing is placed; first, when the strategy names locations that do not exist (the
    webhook refuses those at apply, but it may have been skipped, or a Location deleted)."""
    unknown = unknown_locations(strategy, candidates)
    if not unknown:
        return unplaceable
    known = ", ".join(sorted(c.name for c in candidates)) or "none"
    return f"no location named {', '.join(unknown)} (locations: {known}); {unplaceable}"


def _named(meta: Obj) -> str:
    """`namespace/name`, or a cluster-scoped object's `name`."""
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _free(allocatable: dict[str, str], requested: dict[str, str]) -> engine.Resources | None:
    if not allocatable:
        return None

    def room(name: str, unit: Fraction) -> int:
        total = parse_quantity(allocatable.get(name, "0")) - parse_quantity(
            requested.get(name, "0")
        )
        return max(0, int(total / unit))

    return engine.Resources(
        cpu_milli=room("cpu", Fraction(1, 1000)),
        memory=room("memory", Fraction(1)),
        pods=room("pods", Fraction(1)),
    )


def _changed_at(timestamp: str | None) -> float:
    """When a condition last changed (epoch seconds). Condition times have whole seconds, so
    the change came at some moment within that second: we count from its end, and a grace
    period or a cooldown is never cut short by up to a second."""
    if not timestamp:
        return 0.0
    moment = datetime.datetime.fromisoformat(timestamp)
    return moment.timestamp() + (1.0 if moment.microsecond == 0 else 0.0)


DECIDER = web.AppKey("decider", Decider)
