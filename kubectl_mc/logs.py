"""`kubectl mc logs`: the logs of a pod, or of every pod of a workload, from every location
that runs one, each line prefixed `[location/pod/container]` as `kubectl logs --prefix` does.

The pods are the `pods.remote.kmc.dev` a name, a workload's selector or `-l` finds; each
(location, pod, container) is read on a thread of its own through `pods/<name>@<location>/log`
and its lines are printed whole as they come. With `-f` every stream is followed at once, and
a location that goes away is said on stderr, not fatal: the others go on, and its streams are
asked again (backing off up to 10 s) until it answers. They are asked with timestamps, so a
stream taken up again starts after the last line printed (`sinceTime`), nothing twice;
the timestamps are cut off again unless `--timestamps` asked for them.
"""

from __future__ import annotations

import calendar
import sys
import threading
import time

from kubectl_mc.kube import KubeError
from kubectl_mc.resources import WORKLOADS as _WORKLOAD_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kubectl_mc.kube import Client, Obj

REMOTE = "/apis/remote.kmc.dev/v1alpha1"
LOCATION = "kmc.dev/location"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
MAX_BACKOFF = 10.0
# kubectl's names for workloads (`kubectl logs deploy/web`), as the hub serves them: each name
# of each kind in the plugin's one table of workloads → (its apiVersion, its plural).
WORKLOADS = {
    alias: (f"{w.group}/{w.version}", w.plural)
    for w in _WORKLOAD_KINDS.values()
    for alias in (w.plural, w.singular, *w.shorts)
}
POD_WORDS = ("po", "pod", "pods")


class LogsError(Exception):
    """Something the person must fix; the message says what, in kubectl's words."""


class Source:
    """One container's log in one location: what a stream reads and how its lines start."""

    def __init__(self, location: str, pod: str, container: str) -> None:
        self.location, self.pod, self.container = location, pod, container

    @property
    def label(self) -> str:
        return f"{self.location}/{self.pod}/{self.container}"

    def path(self, namespace: str) -> str:
        return f"{REMOTE}/namespaces/{namespace}/pods/{self.pod}@{self.location}/log"


class Options:
    def __init__(
        self,
        follow: bool = False,
        timestamps: bool = False,
        since_seconds: int | None = None,
        since_time: str | None = None,
        tail: int = -1,
    ) -> None:
        self.follow, self.timestamps, self.tail = follow, timestamps, tail
        self.since_seconds, self.since_time = since_seconds, since_time

    def query(self, container: str, resume_after: str | None) -> list[tuple[str, str]]:
        """The log's query: always with timestamps (to resume a stream after its last
        line); from `resume_after` (a timestamp) when taking a stream up again."""
        pairs = [("container", container), ("timestamps", "true")]
        pairs += [("follow", "true")] if self.follow else []
        if resume_after is not None:
            return [*pairs, ("sinceTime", resume_after)]
        if self.since_seconds is not None:
            pairs.append(("sinceSeconds", str(self.since_seconds)))
        if self.since_time is not None:
            pairs.append(("sinceTime", self.since_time))
        if self.tail >= 0:
            pairs.append(("tailLines", str(self.tail)))
        return pairs


# --- what to read ------------------------------------------------------------------------------


def parse_target(target: str | None, selector: str | None) -> tuple[str | None, str | None]:
    """(workload word or None for a pod, name) of `POD`, `pod/NAME` or `TYPE/NAME`; or
    (None, None) with a selector, as kubectl allows one or the other."""
    if target is None:
        if not selector:
            raise LogsError(
                "error: expected POD, TYPE/NAME, or -l SELECTOR (see kubectl mc logs --help)"
            )
        return None, None
    if selector:
        raise LogsError("error: only one of a selector or a pod or workload may be given")
    word, slash, name = target.partition("/")
    if not slash:
        return None, target
    if not name:
        raise LogsError(f"error: arguments in resource/name form must have a name: {target!r}")
    if word.lower() in POD_WORDS:
        return None, name
    if word.lower() not in WORKLOADS:
        known = ", ".join(sorted({w for w in WORKLOADS if "/" not in w}))
        raise LogsError(f"error: cannot read logs of {word!r}; use a pod or one of: {known}")
    return word.lower(), name


def selector_of(workload: Obj, plural: str) -> str:
    """The label selector a hub workload's pods carry in the children. A Job's own selector
    names its controller's uid, which differs in each child: its pods are found by name."""
    name = workload["metadata"]["name"]
    if plural == "jobs":
        return f"batch.kubernetes.io/job-name={name}"
    selector = (workload.get("spec") or {}).get("selector") or {}
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = ",".join(expression.get("values") or [])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[operator]
        )
    if not terms:
        raise LogsError(f"error: {plural}/{name} has no selector to find its pods by")
    return ",".join(terms)


class Found:
    """The pods to read, each with its location in `kmc.dev/location`; and, for a workload or
    a selector, what finds its pods (to follow the ones that come later) and from which
    resourceVersion of the list on."""

    def __init__(self, pods: list[Obj], selector: str | None = None, version: str = "") -> None:
        self.pods, self.selector, self.version = pods, selector, version


def pods_of(client: Client, namespace: str, target: str | None, selector: str | None) -> Found:
    word, name = parse_target(target, selector)
    if name is not None and word is None:
        return Found([client.get(f"{REMOTE}/namespaces/{namespace}/pods/{name}")])
    if word is not None and name is not None:
        group_version, plural = WORKLOADS[word]
        workload = client.get(f"/apis/{group_version}/namespaces/{namespace}/{plural}/{name}")
        selector = selector_of(workload, plural)
    found = client.get(f"{REMOTE}/namespaces/{namespace}/pods", labelSelector=selector or "")
    items: list[Obj] = found.get("items") or []
    if not items:
        what = f"{target}" if target else f"the selector {selector}"
        raise LogsError(f"error: no pods found for {what} in namespace {namespace!r}")
    version = str((found.get("metadata") or {}).get("resourceVersion", ""))
    ordered = sorted(items, key=lambda p: (_location(p), p["metadata"]["name"]))
    return Found(ordered, selector or "", version)


def sources(
    pods: list[Obj], container: str | None, all_containers: bool, say: Callable[[str], None]
) -> list[Source]:
    """Which container of each pod: the one asked, every one, or the pod's default one (its
    `kubectl.kubernetes.io/default-container`, else its first, said as kubectl says it)."""
    found = []
    for pod in pods:
        meta = pod["metadata"]
        names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        if container:
            chosen = [container]
        elif all_containers:
            chosen = names
        else:
            default = str((meta.get("annotations") or {}).get(DEFAULT_CONTAINER, ""))
            first = default if default in names else (names[:1] or [""])[0]
            if len(names) > 1:
                say(f'Defaulted container "{first}" out of: {", ".join(names)}')
            chosen = [first]
        found += [Source(_location(pod), meta["name"], c) for c in chosen]
    return found


def _location(pod: Obj) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(LOCATION, ""))


# --- reading -----------------------------------------------------------------------------------


def split_timestamp(line: str) -> tuple[str, str]:
    """(timestamp, the rest) of a line asked with timestamps=true; ("", line) otherwise."""
    stamp, space, rest = line.partition(" ")
    if space and instant(stamp) is not None:
        return stamp, rest
    return "", line


def instant(stamp: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 time (`…T10:00:00.5Z`, `+02:00`), or None.
    Fractions have 0 to 9 digits, so texts do not sort as times do."""
    if len(stamp) < 20 or stamp[10] not in "Tt":
        return None
    try:
        seconds = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    rest, fraction = stamp[19:], ""
    if rest.startswith("."):
        end = 1
        while end < len(rest) and rest[end] in "0123456789":
            end += 1
        fraction, rest = rest[1:end], rest[end:]
        if not 1 <= len(fraction) <= 9:
            return None
    if rest in ("Z", "z"):
        offset = 0
    elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":" and (rest[1:3] + rest[4:]).isdigit():
        offset = (int(rest[1:3]) * 60 + int(rest[4:])) * 60 * (1 if rest[0] == "+" else -1)
    else:
        return None
    return (seconds - offset) * 10**9 + int(fraction.ljust(9, "0") or "0")


class Printer:
    """Whole lines to stdout from any thread, prefixed or not."""

    def __init__(self, prefix: bool, out: Callable[[bytes], None] | None = None) -> None:
        self.prefix = prefix
        self._out = out or _stdout
        self._lock = threading.Lock()

    def line(self, source: Source, text: str) -> None:
        if not text.endswith("\n"):
            text += "\n"
        shown = f"[{source.label}] {text}" if self.prefix else text
        with self._lock:
            self._out(shown.encode())


def _stdout(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _retryable(err: KubeError) -> bool:
    """Worth asking again: no answer at all, or the server (or a location) unavailable."""
    return err.code == 0 or err.code >= 500 or err.code == 429


def read(
    client: Client,
    namespace: str,
    source: Source,
    options: Options,
    printer: Printer,
    report: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """One container's log to the end (or, following, for as long as it lasts); False when
    it could not be read. Following, a location that goes away is reported and read again
    from after the last line printed once it answers."""
    last: int | None = None  # the instant of the last line printed
    resume: str | None = None  # its timestamp, as the server wrote it
    lost = False
    backoff = 1.0
    while True:
        try:
            stream = client.stream(source.path(namespace), options.query(source.container, resume))
            if lost:
                report(f"location {source.location} is back: following {source.label} again")
                lost, backoff = False, 1.0
            for raw in stream.lines():
                text = raw.decode(errors="replace")
                stamp, rest = split_timestamp(text)
                at = instant(stamp) if stamp else None
                if resume is not None and at is not None and last is not None and at <= last:
                    continue  # printed before the stream was cut
                printer.line(source, text if options.timestamps or not stamp else rest)
                if at is not None:
                    last, resume = at, stamp
            return True
        except KubeError as err:
            if options.follow and lost and err.code == 404:
                # Gone while its location was away: its share has moved (kubectl mc logs
                # follows a workload's new pods, wherever they are placed).
                report(f"location {source.location} is back without {source.label}: it is gone")
                return True
            if not options.follow or not _retryable(err):
                report(str(err))
                return False
            if not lost:
                report(
                    f"location {source.location}: lost {source.label}: {_words(err)}; "
                    "following the others, trying again"
                )
                lost = True
            sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)


def _words(err: KubeError) -> str:
    text = str(err)
    for prefix in ("Error from server (ServiceUnavailable): ", "Unable to connect to the server: "):
        text = text.removeprefix(prefix)
    return text


class Streams:
    """The streams being read, one thread each; more may start while they run."""

    def __init__(
        self,
        client: Client,
        namespace: str,
        options: Options,
        printer: Printer,
        report: Callable[[str], None],
    ) -> None:
        self.client, self.namespace, self.options = client, namespace, options
        self.printer, self.report = printer, report
        self.known: set[str] = set()
        self.results: list[bool] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, source: Source) -> bool:
        """Read `source` (False when it is read already)."""
        with self._lock:
            if source.label in self.known:
                return False
            self.known.add(source.label)
            index = len(self.results)
            self.results.append(False)
            thread = threading.Thread(target=self._read, args=(index, source), daemon=True)
            self.threads.append(thread)
        thread.start()
        return True

    def _read(self, index: int, source: Source) -> None:
        ok = read(self.client, self.namespace, source, self.options, self.printer, self.report)
        self.results[index] = ok

    def running(self) -> list[threading.Thread]:
        with self._lock:
            return [t for t in self.threads if t.is_alive()]


def run(
    client: Client,
    namespace: str,
    targets: list[Source],
    options: Options,
    prefix: bool,
    report: Callable[[str], None],
    follow_new: Found | None = None,
    container: str | None = None,
    all_containers: bool = False,
) -> bool:
    """Read every source at once; True when every one was read. Following a workload or a
    selector (`follow_new`), its pods that run later are followed too, wherever they are
    placed, until interrupted: a location that goes away for longer than its grace period
    has its share moved elsewhere, and the log goes on there."""
    streams = Streams(client, namespace, options, Printer(prefix), report)
    for source in targets:
        streams.start(source)
    if follow_new is not None and options.follow:
        threading.Thread(
            target=_follow_new,
            args=(client, namespace, follow_new, streams, container, all_containers),
            daemon=True,
        ).start()
        while True:
            time.sleep(0.5)  # until Ctrl-C
    while running := streams.running():
        running[0].join(0.5)  # wakes for Ctrl-C
    return all(streams.results)


def _follow_new(
    client: Client,
    namespace: str,
    found: Found,
    streams: Streams,
    container: str | None,
    all_containers: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Watch the pods the selector finds, from the list's version on, and read each new one
    that runs; when the watch ends or fails, list again (and start from there)."""
    path = f"{REMOTE}/namespaces/{namespace}/pods"
    version, backoff = found.version, 1.0
    while True:
        try:
            if not version:
                listing = client.get(path, labelSelector=found.selector or "")
                version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
                for pod in listing.get("items") or []:
                    _new_pod(pod, streams, container, all_containers)
            params = {"labelSelector": found.selector or "", "resourceVersion": version}
            for event in client.watch(path, params):
                pod = event.get("object") or {}
                if event.get("type") == "ERROR":
                    break  # 410 Gone: list again
                version = str((pod.get("metadata") or {}).get("resourceVersion", version))
                if event.get("type") in ("ADDED", "MODIFIED"):
                    _new_pod(pod, streams, container, all_containers)
                backoff = 1.0
            else:
                continue  # the watch ended: go on from where it was
            version = ""
        except KubeError:
            version = ""
            sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)


def _new_pod(pod: Obj, streams: Streams, container: str | None, all_containers: bool) -> None:
    if (pod.get("status") or {}).get("phase") != "Running" or not _location(pod):
        return  # its log can be read once it runs
    for source in sources([pod], container, all_containers, lambda _: None):
        if streams.start(source):
            streams.report(f"location {source.location}: following {source.label}")
