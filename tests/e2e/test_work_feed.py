"""The work feed (docs/pull.md) on the real bed, read through the hub with plain kubectl: for
each (push) location, `workfeeds` pinned to its name holds exactly what the sync loop applied
there — every object of ours in the child, nothing else, and each one such that applying it
again as `kmc-sync` changes nothing —, a watch starts with the whole state and a bookmark and
then follows a hub edit, an unknown location is a NotFound, and an agent's identity with a
role for its own location's feed reads that one only (another's, or every one's: 403)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import Any

from apiserver.contract import HUB_GENERATION
from kmc_testbed import bed, config

from .conftest import CHILDREN, VENV_BIN, Kubectl
from .test_testbed import deployment

TIMEOUT = 180.0  # CI shares two cores with fifteen control-plane processes
FEEDS = "/apis/mc.kmc.dev/v1alpha1/workfeeds"
WORK = FEEDS + "?fieldSelector=metadata.name%3D{}"
OVERRIDES = "kmc.dev/overrides"
OURS = "deployments,configmaps,services"  # what the test places


def app(namespace: str) -> list[dict[str, Any]]:
    """A Deployment (its location's name in its env, by override) with the ConfigMap it
    mounts and the Service selecting it."""
    web = deployment("web", 3)
    web["metadata"]["annotations"] = {
        OVERRIDES: json.dumps({"*": [{"env": {"set": {"SITE": "${location.name}"}}}]})
    }
    pod = web["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "conf", "configMap": {"name": "conf"}}]
    conf = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "conf", "namespace": namespace},
        "data": {"greeting": "hello"},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": web["spec"]["selector"]["matchLabels"], "ports": [{"port": 80}]},
    }
    web["metadata"]["namespace"] = namespace
    return [conf, web, service]


def feed(hub: Kubectl, location: str, namespace: str) -> dict[tuple[str, str], Any]:
    """The location's feed, of the test's namespace: (kind, name) -> object."""
    body = json.loads(hub.run("get", "--raw", WORK.format(location)).stdout)
    assert body["kind"] == "WorkFeedList", body
    return {
        (o["kind"], o["metadata"]["name"]): o
        for o in body["items"]
        if o["metadata"].get("namespace") == namespace
        or (o["kind"] == "Namespace" and o["metadata"]["name"] == namespace)
    }


def as_pushed(obj: dict[str, Any]) -> dict[str, Any]:
    """A feed object as the push loop applies it: without the hub generation it was made
    from (`mc.kmc.dev/generation`), which only a pull location's child carries, for its
    agent's report."""
    meta = dict(obj["metadata"])
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != HUB_GENERATION}
    meta.pop("annotations", None)
    if notes:
        meta["annotations"] = notes
    return {**obj, "metadata": meta}


def held(child: Kubectl, namespace: str) -> dict[tuple[str, str], Any]:
    """What the child holds of ours in the namespace (the origin label), and the namespace."""
    found = child.json("get", OURS, "-n", namespace, "-l", "kmc.dev/origin-uid")["items"]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in found}
    ns = child.run("get", "namespace", namespace, "-o", "json", check=False)
    if ns.returncode == 0:
        objects[("Namespace", namespace)] = json.loads(ns.stdout)
    return objects


def within(part: Any, whole: Any, path: str = "") -> str | None:
    """Where `part` is not contained in `whole` (None: it is): every field `part` sets has
    that value in `whole`; the child's apiserver adds defaults, never changes ours."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return f"{path}: {whole!r} is not an object"
        for key, value in part.items():
            if key not in whole:
                return f"{path}.{key}: missing"
            why = within(value, whole[key], f"{path}.{key}")
            if why:
                return why
        return None
    if isinstance(part, list):
        if not isinstance(whole, list) or len(part) != len(whole):
            return f"{path}: {whole!r} is not a list of {len(part)}"
        for i, (a, b) in enumerate(zip(part, whole, strict=True)):
            why = within(a, b, f"{path}[{i}]")
            if why:
                return why
        return None
    return None if part == whole else f"{path}: {whole!r} != {part!r}"


def applied_again(child: Kubectl, obj: dict[str, Any]) -> dict[str, Any]:
    """The child's answer to applying `obj` as the sync loop does, as a server dry run."""
    proc = child.run(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=kmc-sync",
        "--force-conflicts",
        "-f",
        "-",
        "-o",
        "json",
        stdin=json.dumps(obj),
    )
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def plain(obj: dict[str, Any]) -> dict[str, Any]:
    """What an apply of ours may change: everything but status, and of the metadata the
    generation, labels and annotations (status moves on its own while pods start)."""
    meta = {k: obj["metadata"].get(k) for k in ("generation", "labels", "annotations")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def mismatch(kubectl: dict[str, Kubectl], location: str, namespace: str) -> str | None:
    """Why the location's feed is not what its child holds (None: it is)."""
    fed, there = feed(kubectl["hub"], location, namespace), held(kubectl[location], namespace)
    want = {("Namespace", namespace), ("ConfigMap", "conf"), ("Deployment", "web")}
    want.add(("Service", "web"))
    if set(fed) != want:
        return f"the feed holds {sorted(fed)}, not {sorted(want)}"
    if set(there) != set(fed):
        return f"the child holds {sorted(there)}, the feed {sorted(fed)}"
    for key, obj in fed.items():
        why = within(as_pushed(obj), there[key])
        if why:
            return f"{key}: {why}"
    return None


def test_the_feed_holds_what_each_push_location_got(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    for obj in app(namespace):
        hub.apply(obj, namespace)
    deadline = time.monotonic() + TIMEOUT
    waiting = {loc: "not looked at" for loc in CHILDREN}
    while waiting:
        for location in list(waiting):
            why = mismatch(kubectl, location, namespace)
            if why is None:
                waiting.pop(location)
            else:
                waiting[location] = why
        assert time.monotonic() < deadline, f"feeds not what the children hold: {waiting}"
        if waiting:
            time.sleep(1)
    for location in CHILDREN:
        fed = feed(hub, location, namespace)
        web = fed[("Deployment", "web")]
        env = web["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "SITE", "value": location} in env  # the location's overrides applied
        assert "status" not in web and OVERRIDES not in web["metadata"].get("annotations", {})
        generation = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["generation"]
        assert web["metadata"]["annotations"][HUB_GENERATION] == str(generation)
        child = kubectl[location]
        for key in (("Deployment", "web"), ("ConfigMap", "conf"), ("Service", "web")):
            live = child.json("get", key[0].lower(), key[1], "-n", namespace)
            again = applied_again(child, as_pushed(fed[key]))
            # Applied again by the sync loop's manager, nothing moves: the same object.
            assert plain(again) == plain(live), f"{location} {key}: applying the feed changes it"
    shares = sum(
        feed(hub, loc, namespace)[("Deployment", "web")]["spec"]["replicas"] for loc in CHILDREN
    )
    assert shares == 3


def watch_lines(url: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    cmd = [os.environ.get("KMC_KUBECTL", "kubectl"), "get", "--raw", url]
    cmd += ["--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def next_event(lines: queue.Queue[str], deadline: float) -> dict[str, Any]:
    left = deadline - time.monotonic()
    assert left > 0, "the watch sent nothing more in time"
    try:
        line = lines.get(timeout=left)
    except queue.Empty:
        raise AssertionError("the watch sent nothing more in time") from None
    event: dict[str, Any] = json.loads(line)
    return event


def test_a_watch_of_the_feed_starts_whole_then_follows_the_hub(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    conf = app(namespace)[0]
    hub.apply(conf, namespace)
    web = app(namespace)[1]
    hub.apply(web, namespace)
    location = CHILDREN[0]
    deadline = time.monotonic() + TIMEOUT
    while ("ConfigMap", "conf") not in feed(hub, location, namespace):
        assert time.monotonic() < deadline, "the ConfigMap never reached the feed"
        time.sleep(0.5)
    url = WORK.format(location) + "&watch=true&allowWatchBookmarks=true&timeoutSeconds=120"
    proc, lines = watch_lines(url)
    try:
        initial: list[dict[str, Any]] = []
        while True:
            event = next_event(lines, deadline)
            if event["type"] == "BOOKMARK":
                break
            initial.append(event)
        annotations = event["object"]["metadata"].get("annotations") or {}
        assert annotations.get("k8s.io/initial-events-end") == "true", event
        assert {e["type"] for e in initial} == {"ADDED"}
        mine = [
            (e["object"]["kind"], e["object"]["metadata"]["name"])
            for e in initial
            if namespace
            in (e["object"]["metadata"].get("namespace"), e["object"]["metadata"]["name"])
        ]
        assert mine[0] == ("Namespace", namespace), mine  # before what is in it
        assert {("ConfigMap", "conf"), ("Deployment", "web")} <= set(mine)
        hub.run("patch", "configmap", "conf", "-n", namespace, "-p", '{"data":{"greeting":"hi"}}')
        while True:
            event = next_event(lines, deadline)
            obj = event["object"]
            if event["type"] == "MODIFIED" and obj["metadata"].get("namespace") == namespace:
                assert obj["kind"] == "ConfigMap" and obj["data"] == {"greeting": "hi"}, event
                break
    finally:
        proc.kill()
        proc.wait()


def test_an_unknown_locations_feed_is_not_found(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    proc = kubectl["hub"].run("get", "--raw", WORK.format("nowhere-at-all"), check=False)
    assert proc.returncode != 0
    assert "NotFound" in proc.stderr or "not found" in proc.stderr, proc.stderr


def test_an_agents_identity_may_read_its_own_locations_feed_only(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    """The feed is authorized like every request, by the hub's RBAC through a
    SubjectAccessReview: a role naming one location's `workfeeds` lets its agent read (list
    and watch) that feed, and another location's, or every location's, is 403 — what the
    join grants."""
    hub = kubectl["hub"]
    own, other = CHILDREN[0], CHILDREN[1]
    user, name = f"kmc:location:{own}", f"kmc-e2e-feed-{own}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {
                "apiGroups": ["mc.kmc.dev"],
                "resources": ["workfeeds"],
                "resourceNames": [own],
                "verbs": ["list", "watch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    hub.apply(role)
    hub.apply(binding)
    try:
        as_agent = ("--as", user, "--as-group", "kmc:locations")
        deadline = time.monotonic() + TIMEOUT
        while True:  # the hub's RBAC (and our short SAR cache) catch up with the new binding
            mine = hub.run("get", "--raw", WORK.format(own), *as_agent, check=False)
            if mine.returncode == 0:
                break
            assert time.monotonic() < deadline, mine.stderr
            time.sleep(1)
        assert json.loads(mine.stdout)["kind"] == "WorkFeedList"
        watch = WORK.format(own) + "&watch=true&timeoutSeconds=1"
        watched = hub.run("get", "--raw", watch, *as_agent, check=False)
        assert watched.returncode == 0, watched.stderr
        assert "k8s.io/initial-events-end" in watched.stdout, watched.stdout
        theirs = hub.run("get", "--raw", WORK.format(other), *as_agent, check=False)
        assert theirs.returncode != 0
        assert "Forbidden" in theirs.stderr or "forbidden" in theirs.stderr, theirs.stderr
        every = FEEDS + "?watch=true&timeoutSeconds=1"
        for url in (watch.replace(own, other), every):
            refused = hub.run("get", "--raw", url, *as_agent, check=False)
            assert refused.returncode != 0 and "orbidden" in refused.stderr, refused.stderr
        views = hub.run(
            "get", "--raw", "/apis/mc.kmc.dev/v1alpha1/deployments", *as_agent, check=False
        )
        assert views.returncode != 0 and "orbidden" in views.stderr, views.stderr
    finally:
        hub.run("delete", "clusterrolebinding", name, "--ignore-not-found")
        hub.run("delete", "clusterrole", name, "--ignore-not-found")
