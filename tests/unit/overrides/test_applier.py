"""The sync loop's applier with overrides: a rule that fails, or a result the child refuses
only because of them, leaves the child as it was, once recorded and once announced."""

from __future__ import annotations

import json
from typing import Any

from apiserver.contract import OVERRIDES, SYNC_MANAGER
from apiserver.kinds import DEPLOYMENT
from apiserver.kube.client import ApiError
from apiserver.objects import Obj
from tests.unit.test_autoscaling import WEB, ChildKube, Watch, applier, hub_web


class Posted:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def post(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


class Refusing(ChildKube):
    """A child that refuses (422) any real apply whose pod template has a cpu limit, and
    `always` refuses everything."""

    def __init__(self, always: bool = False) -> None:
        super().__init__()
        self.always = always
        self.dry_runs: list[Obj] = []

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        containers = body["spec"]["template"]["spec"]["containers"]
        limited = any("limits" in (c.get("resources") or {}) for c in containers)
        if self.always or (limited and not dry_run):
            raise ApiError.of(422, "Invalid", "spec.template.spec.containers[0].resources: bad")
        if dry_run:
            self.dry_runs.append(body)
            return body
        return await super().apply(path, body, manager, force)


def hub(overrides: Any) -> Obj:
    obj = hub_web()
    obj["spec"]["template"]["spec"] = {"containers": [{"name": "app", "image": "web:1"}]}
    obj["metadata"]["annotations"][OVERRIDES] = json.dumps(overrides)
    return obj


FAILING = {"us-east": [{"patch": [{"op": "remove", "path": "/spec/nope"}]}]}
GOOD = {"us-east": [{"env": {"set": {"SITE": "${location.name}"}}}]}
LIMITED = {"us-east": [{"resources": {"limits": {"cpu": "1m"}}}]}


async def apply_once(watch: Watch, overrides: Any) -> tuple[bool, Any, Posted]:
    apply, records = applier(watch)
    posted = Posted()
    apply.events = posted  # type: ignore[assignment]
    ok = await apply.apply(WEB, DEPLOYMENT, hub(overrides), "us-east", {"us-east": 2}, ())
    return ok, (apply, records), posted


async def test_a_failing_rule_leaves_the_child_and_says_so_once() -> None:
    watch = Watch(None)
    ok, (apply, records), posted = await apply_once(watch, FAILING)
    assert ok  # nothing to retry: a change of the object brings it back
    assert watch.kube.applies == []  # the child is left as it was
    [why] = records.of(WEB).override_failures.values()
    assert 'kmc.dev/overrides["us-east"][0] (patch): remove /spec/nope: no such path' in why
    assert posted.events == [("Warning", "OverrideFailed", posted.events[0][2])]
    assert "overrides not applied in us-east" in posted.events[0][2]
    again = await apply.apply(WEB, DEPLOYMENT, hub(FAILING), "us-east", {"us-east": 2}, ())
    assert again and len(posted.events) == 1  # the same failure is announced once
    assert await apply.apply(WEB, DEPLOYMENT, hub(GOOD), "us-east", {"us-east": 2}, ())
    [(manager, body, _)] = watch.kube.applies
    assert manager == SYNC_MANAGER
    assert body["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "SITE", "value": "us-east"}
    ]
    assert records.of(WEB).override_failures == {}


async def test_a_result_the_child_refuses_only_with_overrides_is_theirs() -> None:
    watch = Watch(None)
    watch.kube = Refusing()
    ok, (apply, records), posted = await apply_once(watch, LIMITED)
    assert ok
    again = await apply.apply(WEB, DEPLOYMENT, hub(LIMITED), "us-east", {"us-east": 2}, ())
    assert again and len(posted.events) == 1  # refused again: the same failure, said once
    [plain, _] = watch.kube.dry_runs  # the same object without the rules passes a dry run
    assert "resources" not in plain["spec"]["template"]["spec"]["containers"][0]
    [why] = records.of(WEB).override_failures.values()
    assert 'kmc.dev/overrides["us-east"][0] (resources)' in why and "bad" in why
    assert [reason for _, reason, _ in posted.events] == ["OverrideFailed"]


async def test_a_child_that_refuses_the_plain_object_too_is_retried() -> None:
    watch = Watch(None)
    watch.kube = Refusing(always=True)
    ok, (_, records), posted = await apply_once(watch, LIMITED)
    assert not ok  # not the overrides' fault: the queue tries again
    assert records.of(WEB).override_failures == {} and posted.events == []
