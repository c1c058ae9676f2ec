"""What the agent's cluster should hold, as the work feed says, and what to do about a change.

Pure. The feed is a watch that always starts with the whole state, ending at a bookmark
annotated `k8s.io/initial-events-end` (`feed/handlers.py`). Until a first whole state has
arrived the agent does nothing but apply: it cannot know what is no longer wanted. After a
reconnect, the new whole state replaces the old one, and only then does what the old one had
and the new one lacks go: a lost connection never deletes anything. An object the feed keeps
(`mc.kmc.dev/kept`: its overrides do not apply there, or the hub's handover step leaves it
as it is) is left as it is, never deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from apiserver.objects import Obj
from apiserver.sync.work import WorkKey, ordered

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
KEPT = "mc.kmc.dev/kept"
KINDS = "mc.kmc.dev/kinds"  # the imported kinds the hub places, with their plurals (JSON)


class Apply(NamedTuple):
    object: Obj


class Delete(NamedTuple):
    key: WorkKey
    last: Obj  # as the feed last sent it


Step = Apply | Delete


@dataclass
class Desired:
    """The feed as last heard, and whether a whole state of it has arrived."""

    objects: dict[WorkKey, Obj] = field(default_factory=dict)
    kept: set[WorkKey] = field(default_factory=set)
    kinds: list[Obj] = field(default_factory=list)  # imported kinds, from the last whole state
    whole: bool = False  # a whole state arrived (since the agent started)
    wholes: int = 0  # how many whole states have arrived
    _arriving: dict[WorkKey, Obj] | None = None  # a whole state on its way (after a connect)

    def wanted(self, key: WorkKey) -> Obj | None:
        """What the feed says the cluster holds under `key`, the whole state on its way
        included (None: nothing, as far as is known)."""
        if self._arriving is not None and key in self._arriving:
            return self._arriving[key]
        return self.objects.get(key)

    @property
    def settled(self) -> bool:
        """A whole state has arrived and no new one is on its way: what is not wanted now is
        known not to be wanted."""
        return self.whole and self._arriving is None

    def connected(self) -> None:
        """A new watch starts: a whole state comes first."""
        self._arriving = {}

    def take(self, event: Mapping[str, object]) -> list[Step]:
        """What to do in the cluster about one feed event (in order)."""
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            return []
        if kind == "BOOKMARK":
            meta = obj.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if annotations.get(INITIAL_EVENTS_END) == "true" and self._arriving is not None:
                self.kinds = _kinds(annotations.get(KINDS))
                return self._arrived(self._arriving, _kept(annotations.get(KEPT)))
            return []
        key = WorkKey.of(obj)
        if self._arriving is not None:
            if kind in ("ADDED", "MODIFIED"):
                self._arriving[key] = obj
                return [] if self.objects.get(key) == obj else [Apply(obj)]
            return []  # a whole state has no deletions
        if kind in ("ADDED", "MODIFIED"):
            self.kept.discard(key)
            if self.objects.get(key) == obj:
                return []
            self.objects[key] = obj
            return [Apply(obj)]
        if kind == "DELETED":
            self.objects.pop(key, None)
            self.kept.discard(key)
            return [Delete(key, obj)]
        return []

    def _arrived(self, state: dict[WorkKey, Obj], kept: set[WorkKey]) -> list[Step]:
        gone = [key for key in self.objects if key not in state and key not in kept]
        steps: list[Step] = [Delete(key, self.objects[key]) for key in reversed(ordered(gone))]
        self.objects = state
        self.kept = kept
        self.whole = True
        self.wholes += 1
        self._arriving = None
        return steps


def _kinds(text: object) -> list[Obj]:
    """The imported kinds a bookmark names (JSON); none when unreadable."""
    try:
        refs = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    named = ("apiVersion", "kind", "plural")
    return [
        ref
        for ref in (refs if isinstance(refs, list) else [])
        if isinstance(ref, dict)
        and all(isinstance(ref.get(f), str) and ref.get(f) for f in named)
        and isinstance(ref.get("namespaced"), bool)
    ]


def _kept(text: object) -> set[WorkKey]:
    """The keys of the `kept` references a bookmark carries (JSON); none when unreadable."""
    try:
        refs = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return set()
    return {
        WorkKey(
            str(ref.get("apiVersion", "")),
            str(ref.get("kind", "")),
            str(ref.get("namespace") or ""),
            str(ref.get("name", "")),
        )
        for ref in refs
        if isinstance(ref, dict)
    }
