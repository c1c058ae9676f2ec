"""The ServiceAccount join makes for kmc-apiserver in a child, and when its token is renewed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from apiserver import kinds
from apiserver.contract import SERVICE_ACCOUNT
from apiserver.locations import renew
from kubectl_mc import location_account

REPO = Path(__file__).resolve().parents[2]


def jwt(**claims: object) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln"


def test_the_shipped_manifest_is_what_join_applies() -> None:
    shipped = list(yaml.safe_load_all((REPO / "manifests/location/rbac.yaml").read_text()))
    assert shipped == location_account.objects()


def test_which_credentials_are_short_lived() -> None:
    short = location_account.short_lived
    assert short({"exec": {"command": "aws"}})
    assert short({"tokenFile": "/var/run/token"})
    assert short({"token": jwt(exp=2_000_000_000)})
    assert not short({"token": "an-opaque-static-token"})
    assert not short({"token": jwt(sub="legacy")})  # a JWT that never expires
    assert not short({"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"})
    assert not short({"exec": {"command": "aws"}, "client-certificate-data": "Y2VydA=="})


def test_a_token_is_renewed_with_a_third_of_its_life_left() -> None:
    token = jwt(iat=1000, exp=1000 + 3 * 3600)
    assert not renew.due(token, now=1000 + 3600)
    assert not renew.due(token, now=1000 + 2 * 3600 - 1)
    assert renew.due(token, now=1000 + 2 * 3600)
    assert renew.due(jwt(sub="legacy"))  # no lifetime: replaced by one that has
    assert renew.due("not-a-jwt")


def test_the_secret_keeps_everything_but_the_token() -> None:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://x"}}],
        "users": [{"name": "c", "user": {"token": "old"}}],
        "current-context": "c",
    }
    patch = renew.secret_patch("kubeconfig", renew.with_token(config, "new"))
    written = yaml.safe_load(base64.b64decode(patch["data"]["kubeconfig"]))
    assert written == {**config, "users": [{"name": "c", "user": {"token": "new"}}]}
    secret = {"metadata": {"annotations": {SERVICE_ACCOUNT: "kmc-system/kmc-location"}}}
    assert renew.account(secret) == ("kmc-system", "kmc-location")
    assert renew.account({"metadata": {}}) is None
    assert SERVICE_ACCOUNT == location_account.SERVICE_ACCOUNT_ANNOTATION


def test_unjoin_removes_all_but_the_namespace_the_aggregating_role_before_its_parts() -> None:
    names = [(o["kind"], o["metadata"]["name"]) for o in location_account.removal()]
    assert names == [
        ("RoleBinding", "kmc:location-token"),
        ("Role", "kmc:location-token"),
        ("ClusterRoleBinding", "kmc:location"),
        ("ClusterRole", "kmc:location"),
        ("ClusterRole", "kmc:location-builtin"),
        ("ServiceAccount", "kmc-location"),
    ]


def _granted(group: str, resource: str) -> set[str]:
    """The verbs the join account's rules give on one resource in a child."""
    verbs: set[str] = set()
    for _, rule in location_account.RULES:
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []):
            verbs |= set(rule["verbs"])
    return verbs


def test_the_join_account_may_write_every_placed_kind_and_read_every_punched_through_one() -> None:
    """A kind is one entry in `apiserver/kinds/`, but the account kmc-apiserver uses in a
    joined child is the plugin's (which never imports the server): a kind added there and not
    here would be refused in every joined child. Each placed kind may be written and watched,
    each kind punch-through serves may be read."""
    write = {"get", "list", "watch", "create", "update", "patch", "delete"}
    for kind in kinds.PLACED.values():
        group = kind.api_version.rpartition("/")[0]
        missing = write - _granted(group, kind.plural)
        assert not missing, f"{kind.plural}.{group or 'core'}: the join account lacks {missing}"
    for kind in kinds.REMOTE.values():
        group = kind.api_version.rpartition("/")[0]
        missing = {"get", "list", "watch"} - _granted(group, kind.plural)
        assert not missing, f"{kind.plural}.{group or 'core'}: the join account lacks {missing}"
