"""The `remote.kmc.dev` resources: punch-through reads of the child clusters' own objects,
one per kind with a `remote` in `kinds/`. Their fields are the child's, so they are
documented by pointing at the real kind instead of copying its schema."""

from __future__ import annotations

from apiserver.api.registry import Parameter, Resource, Subresource
from apiserver.contract import REMOTE_GROUP, VERSION
from apiserver.kinds import REMOTE, Kind

READ = ("get", "list", "watch")

_CONTAINER = Parameter(
    "container", "string", "The container, when the pod has several (default: its default one)."
)
_STDIO = (
    Parameter("stdin", "boolean", "Pass the caller's standard input to the container."),
    Parameter("stdout", "boolean", "Pass the container's standard output back."),
    Parameter("stderr", "boolean", "Pass the container's standard error back."),
    Parameter("tty", "boolean", "Allocate a terminal; stderr then comes with stdout."),
)
_FROM_THE_CHILD = (
    " The location holding the pod answers, with the caller's own rights there; NAME@LOCATION "
    "picks one where the name is in several."
)
# The sub-resources of pods that stream (`remote/streams.py`), as Kubernetes lists them.
STREAMS = {
    "log": Subresource(
        name="log",
        kind="PodLogOptions",
        verbs=("get",),
        stream=True,
        description="The log of a container of the pod, as its kubelet gives it." + _FROM_THE_CHILD,
        parameters=(
            _CONTAINER,
            Parameter("follow", "boolean", "Keep the stream open and send lines as they come."),
            Parameter("previous", "boolean", "The log of the container's previous run."),
            Parameter("sinceSeconds", "integer", "Only lines of the last this many seconds."),
            Parameter("sinceTime", "string", "Only lines from this RFC 3339 time on."),
            Parameter("timestamps", "boolean", "Start every line with its RFC 3339 time."),
            Parameter("tailLines", "integer", "Only this many lines from the end."),
            Parameter("limitBytes", "integer", "At most this many bytes."),
        ),
    ),
    "exec": Subresource(
        name="exec",
        kind="PodExecOptions",
        verbs=("create", "get"),
        stream=True,
        description=(
            "Run a command in a container of the pod: a connection switched to WebSocket "
            "(v5.channel.k8s.io, v4.channel.k8s.io) or SPDY, as with a pod of one cluster."
            + _FROM_THE_CHILD
        ),
        parameters=(
            Parameter("command", "string", "The command and its arguments, one per parameter."),
            _CONTAINER,
            *_STDIO,
        ),
    ),
    "attach": Subresource(
        name="attach",
        kind="PodAttachOptions",
        verbs=("create", "get"),
        stream=True,
        description="Attach to the running process of a container of the pod." + _FROM_THE_CHILD,
        parameters=(_CONTAINER, *_STDIO),
    ),
    "portforward": Subresource(
        name="portforward",
        kind="PodPortForwardOptions",
        verbs=("create", "get"),
        stream=True,
        description=(
            "Forward connections to ports of the pod (WebSocket or SPDY, as kubectl "
            "port-forward speaks)." + _FROM_THE_CHILD
        ),
        parameters=(Parameter("ports", "integer", "A port of the pod to forward to."),),
    ),
}


def _remote(entry: Kind) -> Resource:
    assert entry.remote is not None
    kind, home, explain = entry.kind, entry.remote.home, entry.remote.explain
    return Resource(
        group=REMOTE_GROUP,
        version=VERSION,
        plural=entry.plural,
        singular=entry.remote.singular,
        kind=kind,
        namespaced=True,
        verbs=READ,
        categories=("kmc-remote",),
        subresources=tuple(STREAMS[name] for name in entry.remote.subresources),
        description=(
            f"{kind} objects of the child clusters, read through the hub and stitched into one "
            f"list. Each item is the child cluster's own {kind} ({home}), unchanged except "
            "for the annotation kmc.dev/location naming the location it came from; for its "
            f"fields, see kubectl explain {explain}. The same name in two locations gives two "
            "items; get NAME@LOCATION picks one. A location that does not answer is named in "
            "a warning and its items are missing."
        ),
        schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )


RESOURCES: tuple[Resource, ...] = tuple(_remote(kind) for kind in REMOTE.values())
