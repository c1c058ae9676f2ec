"""What the agent does about a change in its own cluster: put back a child edited or deleted
by hand, and delete one of ours the feed no longer has (an orphan: its removal happened
while the agent was away, or before it started).

Pure. The cluster's objects of ours come from the same origin-label watches the push loop
keeps of each child (`loops/sync/children.ChildWatch`, slim copies); what the agent last
wrote is its version (`generation`, or `resourceVersion` for kinds without one) after the
write, as the push loop's `apply.py` records it: a child at that version, wearing the labels
and annotations we set, is as we left it.
"""

from __future__ import annotations

from apiserver.agent.state import Apply, Delete, Step
from apiserver.objects import Obj
from apiserver.sync.work import WorkKey


def version_of(obj: Obj) -> str:
    """What moves when an object's spec changes: its generation, or (for kinds without one,
    like ConfigMaps) its resourceVersion."""
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    return f"g{generation}" if generation else f"rv{meta.get('resourceVersion')}"


def wears(child: Obj, desired: Obj) -> bool:
    """Does the child carry every label and annotation we set, as we set them? (Editing them
    moves no generation.) Others' own keys do not matter."""
    for field in ("labels", "annotations"):
        have = (child.get("metadata") or {}).get(field) or {}
        for key, value in ((desired.get("metadata") or {}).get(field) or {}).items():
            if have.get(key) != value:
                return False
    return True


def after_change(
    key: WorkKey,
    desired: Obj | None,
    kept: bool,
    whole: bool,
    current: Obj | None,
    written: str | None,
) -> Step | None:
    """The step for one object whose copy in the cluster changed (or was first seen).

    `desired`: what the feed says it holds (None: nothing); `kept`: the feed says to leave it
    as it is; `whole`: a whole feed state has arrived (before that nothing is an orphan);
    `current`: the cluster's copy (None: gone); `written`: its version after our last write
    (None: not written by this agent process)."""
    if kept:
        return None
    if desired is None:
        if (
            current is not None
            and whole
            and not (current.get("metadata") or {}).get("deletionTimestamp")
        ):
            return Delete(key, current)
        return None
    if current is None:
        return Apply(desired)  # deleted by hand: made again
    if written == version_of(current) and wears(current, desired):
        return None
    return Apply(desired)
