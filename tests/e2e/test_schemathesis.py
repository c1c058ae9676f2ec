"""schemathesis against kmc-apiserver's own OpenAPI, with the hub's front-proxy identity.

The hub's aggregator calls kmc-apiserver over TLS with its front-proxy client certificate and
the user in `X-Remote-User`/`X-Remote-Group`; this test does the same, straight to
kmc-apiserver, as the bed's admin. Every operation of both groups' OpenAPI v3 documents (as
served) gets valid and invalid input from schemathesis. The bar: no 5xx, and every error a
proper Kubernetes `Status` (kind, apiVersion, status Failure, a message, a reason, and the
HTTP status as its code), which is what kubectl prints and what clients match on. Pods'
streaming sub-resources are in it too: a log is never followed (it would never end), and
exec, attach and portforward, asked without the protocol switch they need, are refused by the
child that holds the pod (400) and must say so as a Status.

The bed is shared: writes (PUT/PATCH of `strategy`) only ever reach this test's namespace,
where a Deployment gives reads and writes a real object; reads may name any namespace. Every
watch ends within a second. The run is deterministic (Hypothesis derandomized) and bounded:
the handlers are shared by every kind of a group, so one kind per group is fuzzed in depth
and the others get a few examples each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, CheckContext, CheckFunction, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok

from kmc_testbed import bed, config

from .conftest import Kubectl
from .test_aggregated import remote_pods
from .test_locations import wait_until
from .test_testbed import deployment

ADMIN = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}
GROUPS = ("mc.kmc.dev", "remote.kmc.dev")
VERSION = "v1alpha1"
WRITES = frozenset({"PUT", "PATCH"})
# Plain JSON, both Table versions kubectl asks for, and one nobody serves (406).
ACCEPTS = (
    None,
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
    "text/plain",
)
# Examples per operation: in depth for one kind per group, a few for the others and for
# lists in every namespace (whose handlers are the namespaced lists').
DEEP, SHALLOW = 50, 10
DEEP_KINDS = frozenset({("mc.kmc.dev", "deployments"), ("remote.kmc.dev", "pods")})
LABEL = "kmc-e2e"  # not kmc.dev/…: kmc keeps those labels to the hub
INTEGER = re.compile(r"[+-]?[0-9]+")
GO_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})  # what strconv.ParseBool takes
NOT_READY = re.compile(r"location \S+ is not Ready")

Operation = APIOperation[Any, Any, Any, Any]


@dataclass(frozen=True)
class Target:
    base_url: str
    session: requests.Session
    ca: str
    cert: tuple[str, str]
    namespace: str
    names: dict[str, tuple[str, ...]]  # plural (any mc.kmc.dev kind: "web") → real names

    @property
    def ours(self) -> str:
        """A label selector for this test's objects (the Deployment, its ReplicaSet and Pods)."""
        return f"{LABEL}={self.namespace}"


# --- checks ------------------------------------------------------------------------------------


def no_server_error(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """schemathesis's `not_a_server_error`, but for the one 5xx that reports the bed rather than
    a bug: 503 for `name@location` while that location is not Ready (children come and go
    on a shared bed)."""
    if response.status_code == 503 and NOT_READY.match(_status(response).get("message", "")):
        return None
    return not_a_server_error(ctx, response, case)


def kubernetes_status(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """Every error is a failure `Status` whose code is the HTTP status."""
    code = response.status_code
    if code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.split(";")[0].strip() == "application/json", (
        f"{code} answered as {content_type!r}, not as application/json"
    )
    body = _status(response)
    wanted = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    wrong = {key: body.get(key) for key, value in wanted.items() if body.get(key) != value}
    assert not wrong, f"{code} with a body that is no failure Status: {wrong} in {body}"
    for key in ("message", "reason"):
        assert isinstance(body.get(key), str) and body[key], f"{code}: a Status without {key}"
    return None


def _status(response: Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content)
    except ValueError as err:
        raise AssertionError(
            f"{response.status_code} with a body that is not JSON: {err}"
        ) from None
    assert isinstance(body, dict), f"{response.status_code} with a body that is no object: {body}"
    return body


CHECKS: list[CheckFunction] = [no_server_error, kubernetes_status]


# --- the server, its document, and what is real in the namespace -------------------------------


@pytest.fixture
def target(installed: bed.State, kubectl: dict[str, Kubectl], namespace: str) -> Iterator[Target]:
    hub = kubectl["hub"]
    web = deployment("web", 2)
    for meta in (web["metadata"], web["spec"]["template"]["metadata"]):
        meta["labels"][LABEL] = namespace
    hub.apply(web, namespace)
    # Placed and synced: its pods exist in the children (running or not, their names are what
    # the reads need; a bed busy with benchmarks may take a while to run them).
    wait_until("2 pods in the children", lambda: len(remote_pods(hub, namespace)) == 2, 180)
    pki = config.state_dir() / "hub" / "pki"
    ca = str(bed.kmc_folder() / "certs" / "ca.crt")
    cert = (str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key"))
    base_url = f"https://localhost:{installed.kmc_port}"
    with requests.Session() as session:
        session.trust_env = False  # REQUESTS_CA_BUNDLE would take the place of `verify`
        session.verify, session.cert = ca, cert
        session.headers.update(ADMIN)
        names = real_names(session, base_url, namespace)
        yield Target(base_url, session, ca, cert, namespace, names)


def real_names(
    session: requests.Session, base_url: str, namespace: str
) -> dict[str, tuple[str, ...]]:
    """What exists in the namespace, by plural: remote items also as `name@location`."""
    names: dict[str, tuple[str, ...]] = {}
    for plural in ("pods", "replicasets", "deployments", "configmaps", "events"):
        url = f"{base_url}/apis/remote.kmc.dev/{VERSION}/namespaces/{namespace}/{plural}"
        answer = session.get(url, timeout=30)
        answer.raise_for_status()
        found: list[str] = []
        for item in answer.json()["items"]:
            meta = item["metadata"]
            found += [meta["name"], f"{meta['name']}@{meta['annotations']['kmc.dev/location']}"]
        names[plural] = tuple(found)
    return names


def document(target: Target) -> dict[str, Any]:
    """Both groups' OpenAPI v3 documents as one (their schema names are group-qualified)."""
    merged: dict[str, Any] = {
        "openapi": "3.0.0",
        "info": {"title": "kmc-apiserver", "version": VERSION},
        "paths": {},
        "components": {"schemas": {}},
    }
    for group in GROUPS:
        answer = target.session.get(
            f"{target.base_url}/openapi/v3/apis/{group}/{VERSION}", timeout=30
        )
        answer.raise_for_status()
        served = answer.json()
        merged["paths"].update(served["paths"])
        merged["components"]["schemas"].update(served["components"]["schemas"])
    return merged


def operations(target: Target) -> list[Operation]:
    settings = schemathesis.Config.from_dict(
        {
            "base-url": target.base_url,
            "headers": ADMIN,
            "tls-verify": target.ca,
            "request-cert": target.cert[0],
            "request-cert-key": target.cert[1],
            "request-timeout": 20,
        }
    )
    schema = schemathesis.openapi.from_dict(document(target), config=settings)
    results = list(schema.get_all_operations())
    invalid = [str(result.err()) for result in results if not isinstance(result, Ok)]
    assert not invalid, "schemathesis cannot read the served OpenAPI:\n" + "\n".join(invalid)
    return [result.ok() for result in results if isinstance(result, Ok)]


# --- fuzzing -----------------------------------------------------------------------------------


def kind_of(operation: Operation) -> tuple[str, str]:
    """(group, plural) of `/apis/<group>/<version>[/namespaces/{namespace}]/<plural>/…`."""
    parts = operation.path.strip("/").split("/")
    rest = parts[5:] if parts[3] == "namespaces" else parts[3:]
    return parts[1], rest[0]


def bounded(query: dict[str, Any]) -> None:
    """A watch ends within a second: an integer timeoutSeconds (or none) becomes at most 1;
    anything else is the server's to refuse."""
    value = query.get("timeoutSeconds")
    if value is None or (isinstance(value, str) and INTEGER.fullmatch(value)):
        value = int(value or 1)
    if isinstance(value, int) and not isinstance(value, bool):
        query["timeoutSeconds"] = min(value, 1)


def fuzz(operation: Operation, target: Target) -> str | None:
    """Valid and invalid input for one operation; the failure schemathesis reports, or None."""
    group, plural = kind_of(operation)
    known = target.names.get(plural, ()) if group == "remote.kmc.dev" else ("web",)
    namespaced = "{namespace}" in operation.path

    @hypothesis.settings(
        max_examples=DEEP if (group, plural) in DEEP_KINDS and namespaced else SHALLOW,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate),
        print_blob=False,
    )
    @hypothesis.given(
        case=st.one_of(
            operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
            operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
        ),
        ours=st.booleans(),
        name=st.sampled_from(known) if known else st.none(),
        accept=st.sampled_from(ACCEPTS),
    )
    def run(case: Case[Any], ours: bool, name: str | None, accept: str | None) -> None:
        path = case.path_parameters
        if path is not None and "namespace" in path and (ours or case.method in WRITES):
            path["namespace"] = target.namespace
            if "name" in path and name is not None:
                path["name"] = name
        # Writes stay in this test's namespace, whatever was generated.
        assert case.method not in WRITES or (path or {}).get("namespace") == target.namespace
        if not namespaced and not (case.query or {}).get("labelSelector"):
            # Every benchmark's objects on the shared bed, in every child, would be read.
            case.query = {**(case.query or {}), "labelSelector": target.ours}
        if case.query and "watch" in case.query:
            bounded(case.query)
        follows = str((case.query or {}).get("follow")) in GO_TRUE
        if follows and operation.path.endswith("/log"):
            case.query["follow"] = "false"  # a followed log never ends, like a watch
        headers = {"Accept": accept} if accept else None
        case.call_and_validate(session=target.session, headers=headers, checks=CHECKS)

    try:
        run()
    except (Exception, FailureGroup) as err:
        return f"{operation.label}: {err}"
    return None


def test_schemathesis_finds_no_5xx_and_only_status_errors(target: Target) -> None:
    failures = [failure for operation in operations(target) if (failure := fuzz(operation, target))]
    assert not failures, "\n\n".join(failures)
