"""Writing one child: apply it (making its namespace first, unless it is cluster-scoped), make
it anew when its kind says a change cannot be made in place, or delete it; and keep the
namespaces we made in the children wearing their hub namespace's labels and annotations.

Server-side apply with field manager `kmc-sync`. An apply of what the child already holds, as
we last applied it, is skipped: a child's status change re-queues its hub object, and most
looks change nothing.

A location's overrides (the Overrides and ClusterOverrides that target the hub object, then its
own `kmc.dev/overrides`, `overrides/`) are part of the child made for it, so the digest that
spares an apply, and with it drift correction, is of the overridden object. A rule that fails
there leaves that child as it was (no apply, no retry: a change of the hub object, of an
override that targets it or of the Location brings it back), says so in the
object's record for the fold's `Overridden=False` condition, and posts a Warning Event once
per new failure. The other locations go on. So does a result the child refuses only because
of its rules: after a 400/422, the same object without them is dry-run there, and if that
passes the refusal is the rules' (`_overrides_refused`).

A child whose size its own autoscaler sets (`held`: a hub HPA targets the workload and is
placed there too) is applied without `spec.replicas`, so the autoscaler's writes are never
reverted. Server-side apply resets a field its last owner stops sending, so before `kmc-sync`
first leaves it out, the child's current size is applied under a second manager
(`SCALE_HANDOVER_MANAGER`, not forced: a conflict means someone else, the autoscaler, owns
it already), which keeps it owned until the autoscaler takes it. A new child is still made
with its share, the hub's `spec.replicas` divided: the size it starts at.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection

import msgspec

from apiserver.contract import (
    ORIGIN,
    OVERRIDE_FAILED,
    SCALE_HANDOVER_MANAGER,
    SYNC_MANAGER,
    Placement,
)
from apiserver.hubcache import HubCache
from apiserver.kinds import Change, Key, Kind
from apiserver.kube import events
from apiserver.kube.client import ApiError
from apiserver.loops.sync.children import Children, ChildWatch
from apiserver.loops.sync.overridestatus import Failed, Tally, source_id
from apiserver.loops.sync.records import Records
from apiserver.models.child_inputs import ChildInputs
from apiserver.models.override_index import Source
from apiserver.objects import Obj
from apiserver.overrides.apply import OverrideError
from apiserver.overrides.rules import RuleError
from apiserver.sync.desired import child_namespace, spec_of

log = logging.getLogger(__name__)


class Applier:
    def __init__(
        self,
        cache: HubCache,
        children: Children,
        records: Records,
        recorder: events.Recorder,
        tally: Tally | None = None,
    ) -> None:
        self.cache = cache
        self.children = children
        self.records = records
        self.events = recorder
        self.tally = tally or Tally()  # what each Override applies to, for its status

    async def apply(
        self,
        key: Key,
        kind: Kind,
        hub: Obj,
        location: str,
        shares: Placement,
        stale: Collection[str],
        held: bool = False,
    ) -> bool:
        """Apply one child; False when it failed (and should be tried again). `held`: its
        size is its autoscaler's, not ours to send."""
        watch = self.children.get(location)
        if watch is None or location in stale:
            return True  # retried when the location is back (its Ready change re-queues us)
        watch.ensure(kind)
        meta = hub["metadata"]
        namespace = meta.get("namespace")  # None: cluster-scoped (a PriorityClass)
        inputs = self.cache.child_inputs(kind, hub)
        record = self.records.of(key)
        record.override_objects = bool(inputs.overrides)
        applying = inputs.applying(location)
        try:
            desired = inputs.child(hub, kind, location, shares)
        except (RuleError, OverrideError) as err:
            self._override_failed(key, hub, location, str(err), applying, _whose(err, applying))
            return True  # left as it was; a change of the object or the Location retries
        current = watch.get(key)
        held = held and current is not None
        if held:
            spec_of(desired).pop("replicas", None)
        else:
            record.released.discard(location)
        digest = _digest(desired)
        if current is not None:
            # As we last applied it and we would apply the same again; or a change the kind
            # keeps from (a finished Job's share: its work there is done, and stays on record
            # as it is). The hub's generation may still have moved (a Deployment's does on
            # annotation changes, such as a new placement): the child reflects it all the same.
            # Labels and annotations are in the check too: editing them moves no generation.
            unchanged = record.written.get(location) == (digest, _version(current)) and _wears(
                current, desired
            )
            change = Change.APPLY if unchanged else kind.change(current, desired)
            if change is Change.REPLACE:
                return await self.replace(key, kind, hub, location)
            if unchanged or change is Change.KEEP:
                self._overrides_applied(key, location, applying)
                record.applied_in(
                    location,
                    int(meta.get("generation", 0)),
                    int(current["metadata"].get("generation", 0)),
                )
                return True
        if held and current is not None and location not in record.released:
            if not await self._release(key, kind, watch, current):
                return False
            record.released.add(location)
        try:
            if namespace:
                await self._ensure_namespace(watch, namespace)
            answer = await watch.kube.apply(
                kind.path(namespace, meta["name"]), desired, SYNC_MANAGER
            )
        except ApiError as err:
            if err.code == 404 and namespace:
                watch.namespaces.discard(namespace)  # deleted behind our back
            if err.code in (400, 422) and await self._overrides_refused(
                key, kind, hub, location, shares, inputs, held
            ):
                why = _refusal(hub, inputs, location, err)
                self._override_failed(key, hub, location, why, applying, Failed(None, None, why))
                return True  # left as it was, as for a rule that fails here
            log.warning("%s: applying to %s failed: %s", key, location, err)
            return False
        self._overrides_applied(key, location, applying)
        record.written[location] = (digest, _version(answer))
        record.applied_in(
            location,
            int(meta.get("generation", 0)),
            int(answer.get("metadata", {}).get("generation", 0)),
        )
        await watch.observe(kind, answer)
        return True

    async def _overrides_refused(
        self,
        key: Key,
        kind: Kind,
        hub: Obj,
        location: str,
        shares: Placement,
        inputs: ChildInputs,
        held: bool,
    ) -> bool:
        """The child refused what we sent: was it the overrides? Only if the location has
        some and the same object without them passes a dry run there."""
        watch = self.children.get(location)
        if watch is None or not inputs.rules(hub, location):
            return False
        plain = inputs.plain(hub, kind, location, shares)
        if held:
            spec_of(plain).pop("replicas", None)
        meta = hub["metadata"]
        try:
            await watch.kube.apply(
                kind.path(meta.get("namespace"), meta["name"]), plain, SYNC_MANAGER, dry_run=True
            )
        except ApiError:
            return False  # refused without them too: not theirs
        log.info("%s: %s refuses the object only with its overrides", key, location)
        return True

    def _overrides_applied(self, key: Key, location: str, applying: list[Source]) -> None:
        """The child holds what its rules make: a failure there is over. (Cleared only
        then: a child that refuses the result fails again after its rules applied.)"""
        self.tally.saw(key, location, applying)
        if self.records.of(key).override_failures.pop(location, None) is not None:
            log.info("%s: overrides apply in %s again", key, location)

    def _override_failed(
        self,
        key: Key,
        hub: Obj,
        location: str,
        why: str,
        applying: list[Source],
        failed: Failed | None,
    ) -> None:
        if failed is not None:
            self.tally.saw(key, location, applying, failed)
        record = self.records.of(key)
        if record.override_failures.get(location) == why:
            return
        record.override_failures[location] = why
        log.warning("%s: overrides do not apply in %s: %s", key, location, why)
        self.events.post(
            hub,
            "Warning",
            OVERRIDE_FAILED,
            f"overrides not applied in {location}, its copy is left as it was: {why}",
        )

    async def _release(self, key: Key, kind: Kind, watch: ChildWatch, child: Obj) -> bool:
        """Hold the child's current spec.replicas under the handover manager, so that our
        next apply, without it, does not reset it. False when that failed."""
        meta, replicas = child["metadata"], (child.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int):
            return True  # nothing set: nothing to keep
        stub = {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"replicas": replicas},
        }
        path = kind.path(meta["namespace"], meta["name"])
        try:
            answer = await watch.kube.apply(path, stub, SCALE_HANDOVER_MANAGER, force=False)
        except ApiError as err:
            if err.code == 409:
                return True  # changed by another manager since we saw it: theirs already
            log.warning("%s: handing replicas over in %s failed: %s", key, watch.location, err)
            return False
        await watch.observe(kind, answer)
        return True

    async def _ensure_namespace(self, watch: ChildWatch, namespace: str) -> None:
        """Make the child's namespace if it is missing, labelled with the hub namespace's uid
        so that it goes when that does, and then give it the hub namespace's own labels and
        annotations (`copy_namespace`); one that was there before is left as it is."""
        if namespace in watch.namespaces:
            return
        hub = self.cache.namespaces.get(namespace)
        labels = {ORIGIN: hub["metadata"]["uid"]} if hub else {}
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": labels},
        }
        try:
            await watch.kube.create("/api/v1/namespaces", body)
        except ApiError as err:
            if err.code != 409:
                raise
        else:
            if hub is not None:
                # Made by a create, which owns only the origin label: the rest is applied, so
                # that a label the hub namespace loses later leaves the child's too.
                await self._apply_namespace(watch, hub)
        watch.namespaces.add(namespace)

    async def copy_namespace(self, hub: Obj, stale: Collection[str]) -> None:
        """Give every child namespace we made for a hub Namespace (origin label) the hub
        namespace's own labels and annotations, as they change; a child that wears them as
        we last applied them is not written. Raises when a location could not be written
        (looked at again after the queue's backoff)."""
        name = hub["metadata"]["name"]
        failed = []
        for location, watch in list(self.children.watches.items()):
            child = watch.made.get(name)
            if child is None or location in stale or child["metadata"].get("deletionTimestamp"):
                continue  # not ours: one that was there before is left as it is
            desired = child_namespace(hub)
            if watch.namespaces_written.get(name) == _digest(desired) and _wears(child, desired):
                continue
            try:
                await self._apply_namespace(watch, hub)
            except ApiError as err:
                log.warning("namespace %s: applying to %s failed: %s", name, location, err)
                failed.append(location)
        if failed:
            raise ApiError.of(
                503, "ServiceUnavailable", f"namespace {name}: applying to {failed} failed"
            )

    async def _apply_namespace(self, watch: ChildWatch, hub: Obj) -> None:
        desired = child_namespace(hub)
        name = desired["metadata"]["name"]
        answer = await watch.kube.apply(f"/api/v1/namespaces/{name}", desired, SYNC_MANAGER)
        watch.namespaces_written[name] = _digest(desired)
        await watch.made.observe(answer)

    async def replace(self, key: Key, kind: Kind, hub: Obj, location: str) -> bool:
        """Delete a child that cannot take its new spec in place; its deletion's watch event
        brings the object back here, and the child is made anew."""
        if not await self.delete(key, kind, hub, location):
            return False
        self.events.post(
            hub,
            "Normal",
            "Replaced",
            f"replaced the {kind.kind} in {location}: its new share cannot be set in place "
            "(completions are immutable); its pods there start again",
        )
        return True

    async def delete(self, key: Key, kind: Kind, hub: Obj, location: str) -> bool:
        """True once the child is gone (or was never there)."""
        watch = self.children.get(location)
        if watch is None:
            return False
        meta = hub["metadata"]
        try:
            await watch.kube.delete(kind.path(meta.get("namespace"), meta["name"]))
        except ApiError as err:
            if err.code != 404:
                log.warning("%s: deleting from %s failed: %s", key, location, err)
                return False
        self.records.of(key).gone_from(location)
        self.tally.drop(key, location)
        log.info("%s: removed from %s", key, location)
        return True


def _whose(err: RuleError | OverrideError, applying: list[Source]) -> Failed | None:
    """Which of the Override objects failed (None: the object's own annotation did)."""
    for source in applying:
        if isinstance(err, OverrideError) and err.rule.source.startswith(f"{source.label}:"):
            rule = err.rule.name.removeprefix(f"{source.label}: ")
            return Failed(source_id(source), rule, err.problem)
        if isinstance(err, RuleError) and source.error == str(err):
            return Failed(source_id(source), None, str(err))
    return None


def _refusal(hub: Obj, inputs: ChildInputs, location: str, err: ApiError) -> str:
    """Why a location refused its overridden child, naming the rules that applied there."""
    rules = ", ".join(rule.name for rule in inputs.rules(hub, location))
    return f"the child in {location} refuses what its rules {rules} make: {err}"


def _wears(child: Obj, desired: Obj) -> bool:
    """Does the child still carry every label and annotation we set, as we set them? Others'
    own keys (a controller's revision annotation, a label added by hand) do not matter."""
    for field in ("labels", "annotations"):
        have = child.get("metadata", {}).get(field) or {}
        for key, value in (desired["metadata"].get(field) or {}).items():
            if have.get(key) != value:
                return False
    return True


def _digest(desired: Obj) -> str:
    return hashlib.sha256(msgspec.json.encode(desired, order="sorted")).hexdigest()


def _version(obj: Obj) -> str:
    """What changes when an object's spec changes: its generation, or (for kinds without one,
    like ConfigMaps) its resourceVersion."""
    meta = obj.get("metadata", {})
    generation = meta.get("generation")
    return f"g{generation}" if generation else f"rv{meta.get('resourceVersion')}"
