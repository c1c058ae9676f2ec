"""Stand-ins for the sync loop's fold tests: a hub that records status applies, a child
Deployment `web` at some count of ready pods, and a Folder set up over them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import aiohttp

from apiserver.kinds import DEPLOYMENT, Key
from apiserver.kube import events
from apiserver.kube.client import Credentials, Kube
from apiserver.loops.sync.fold import Folder, Hold
from apiserver.loops.sync.records import Records
from apiserver.objects import Obj

KEY = Key("Deployment", "demo", "web")


class Hub(Kube):
    """Records status applies (manager, body) and answers with the object applied."""

    def __init__(self) -> None:
        super().__init__(
            cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub"
        )
        self.applies: list[tuple[str, Obj]] = []

    @property
    def writes(self) -> list[Obj]:
        return [body for _, body in self.applies]

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        self.applies.append((manager, body))
        return body


def child(ready: int) -> Obj:
    """The child `web` in us-east, its controller caught up, `ready` of 3 pods ready."""
    return {
        "metadata": {"name": "web", "namespace": "demo", "generation": 1},
        "spec": {"replicas": 3},
        "status": {
            "observedGeneration": 1,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {"type": "Available", "status": "True" if ready == 3 else "False"},
                {"type": "Progressing", "status": "True"},
            ],
        },
    }


@dataclass
class Folding:
    """A Folder over a recording hub, folding the hub Deployment `web` (3 replicas, all
    placed in us-east, applied there); `later` holds the delays it asked to be called back
    after."""

    hold: float
    hub: Hub = field(default_factory=Hub)
    records: Records = field(default_factory=Records)
    later: list[tuple[Key, float]] = field(default_factory=list)
    obj: Obj = field(
        default_factory=lambda: {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {"name": "web", "namespace": "demo", "uid": "u1", "generation": 1},
            "spec": {"replicas": 3},
        }
    )

    def __post_init__(self) -> None:
        self.folder = Folder(
            self.hub,
            self.records,
            events.Recorder(self.hub, "test"),
            lambda key, delay: self.later.append((key, delay)),
            Hold(self.hold),
        )
        self.records.of(KEY).applied["us-east"] = (1, 1)

    async def fold(self, seen: Obj) -> None:
        """Fold with the child as `seen`; the hub object takes what was written."""
        await self.folder.fold(KEY, DEPLOYMENT, self.obj, {"us-east": seen}, {"us-east": 3}, {}, ())
        if self.hub.applies:
            self.obj["status"] = self.hub.writes[-1]["status"]
