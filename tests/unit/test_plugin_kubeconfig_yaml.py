"""The small kubeconfig YAML reader: PyYAML's answer or `Unusual`, never a different one; and
no `Unusual` for the kubeconfigs kubectl, cloud CLIs and people write."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_mc.kubeconfig import _parse
from kubectl_mc.kubeconfig_yaml import Unusual, load

KUBECTL_WRITTEN = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=
    server: https://127.0.0.1:6443
    tls-server-name: kubernetes
  name: hub
- cluster:
    insecure-skip-tls-verify: true
    proxy-url: http://user:p%40ss@proxy:3128
    server: https://eks.example.com
  name: arn:aws:eks:us-east-1:123456789012:cluster/prod
contexts:
- context:
    cluster: hub
    namespace: demo
    user: hub
  name: hub
current-context: hub
kind: Config
preferences: {}
users:
- name: hub
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - us-east-1
      - eks
      - get-token
      - --cluster-name
      - prod
      command: aws
      env:
      - name: AWS_PROFILE
        value: "123"
      - name: EMPTY
        value: ""
      interactiveMode: IfAvailable
      provideClusterInfo: false
- name: token
  user:
    token: abc.def-ghi
"""

HAND_WRITTEN = """\
# my clusters
---
apiVersion: v1
kind: Config
current-context: 'dev'   # the default
clusters:
  - name: dev
    cluster:
      server: "https://dev.example.com:443"   # behind a proxy
      certificate-authority: ca.crt
contexts:
  -   name: dev
      context:
        cluster: dev
        user: me
users:
  - name: "me"
    user:
      tokenFile: /var/run/token
      exec:
      token: 'it''s'
"""

UNUSUAL = [
    "a: &x 1\nb: *x\n",
    "a: !!str 1\n",
    "a: |\n  text\n",
    "a: >\n  text\n",
    "a: 'two\n  lines'\n",
    "a: plain\n  continued\n",
    "a: [1, 2]\n",
    "a: {b: c}\n",
    "a: 1.5\n",
    "a: 0x1f\n",
    "a: 2024-01-01\n",
    "a: 1_000\n",
    "1: a\n",
    "a: b: c\n",
    "%YAML 1.1\n---\na: 1\n",
    "a: 1\n---\nb: 2\n",
    "a:\n\t- b\n",
    '{"a": 1}\n',
    "- - a\n",
]


def test_kubectl_and_hand_written_kubeconfigs_are_read_as_pyyaml_reads_them() -> None:
    for text in (KUBECTL_WRITTEN, HAND_WRITTEN, KUBECTL_WRITTEN.replace("\n", "\r\n")):
        assert load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", UNUSUAL)
def test_what_it_does_not_read_is_left_to_pyyaml(text: str) -> None:
    with pytest.raises(Unusual):
        load(text)
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:  # and PyYAML's message for what is not YAML
        with pytest.raises(ValueError, match="^" + re.escape(str(err)) + "$"):
            _parse(text)
        return
    assert _parse(text) == (data if isinstance(data, dict) else {})


TRICKY = [
    "true", "Yes", "off", "NULL", "~", "", " ", "0", "-1", "+2", "007", "0o7", "0x1F", "1.5",
    ".inf", "1e3", "12:30", "2024-01-01", "2024-1-1 10:00:00", "<<", "=", "--region", "-",
    "- x", "a: b", "a:b", "a #b", "a#b", "#c", "'q'", '"d"', "it's", 'say "hi"', "back\\slash",
    "tab\there", "ü", "é:x", "@at", "`tick", "%pct", "&amp", "*star", "!bang", "|bar", ">gt",
    "?q", ": c", ",comma", "[x", "]x", "{x", "}x", "trailing ", " leading", "x" * 120,
    "line\nbreak", "https://127.0.0.1:6443", "arn:aws:eks:us-east-1:1:cluster/a b",
]  # fmt: skip
scalars = st.one_of(
    st.sampled_from(TRICKY),
    st.text(max_size=12),
    st.integers(-5, 500),
    st.booleans(),
    st.none(),
)
keys = st.one_of(st.sampled_from(TRICKY), st.text(min_size=1, max_size=8))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    doc=st.dictionaries(keys, documents, max_size=5),
    style=st.sampled_from(
        [{}, {"indent": 4}, {"default_style": '"'}, {"width": 20}, {"allow_unicode": True}]
    ),
)
def test_pyyaml_dumps_read_the_same_or_not_at_all(doc: dict[str, Any], style: Any) -> None:
    text = yaml.safe_dump(doc, default_flow_style=False, **style)
    try:
        mine = load(text)
    except Unusual:
        return
    assert mine == yaml.safe_load(text), text


@pytest.mark.parametrize("value", ["\xa0", "a\xa0", "a \u3000"])
def test_a_trailing_unicode_space_is_part_of_the_value(value: str) -> None:
    """YAML's white space is the space and the tab: a no-break space ending a plain scalar
    is the scalar's (Hypothesis found `k: \\xa0` read as null)."""
    text = yaml.safe_dump({"k": value}, allow_unicode=True)
    assert load(text) == yaml.safe_load(text) == {"k": value}
