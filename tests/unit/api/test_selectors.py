"""Label and field selectors select and fail exactly like kube-apiserver's (its own test cases)."""

from __future__ import annotations

import pytest

from apiserver.api import selectors
from apiserver.api.selectors import FieldRequirement, Requirement
from apiserver.kube.client import ApiError

# --- labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
        "\rx",
        "this-is-a-dns.domain.com/key-with-dash",
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        "foo  in\t (abc)",
        "x notin\n (abc)",
        "x in (abc,)",
        "x in ()",
        "x notin (abc,def),bar,z in (),w",
        "notin=in",
        "x notin ( )",
        "x notin (, a)",
        "a ",
        "a in (x,y,notin, z,in)",
    ],
)
def test_good_label_selectors_parse(text: str) -> None:
    selectors.parse_labels(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "x=a||y=b",
            'unable to parse requirement: values[0][x]: Invalid value: "a||y": a valid label '
            "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
            "or '12345', "
            "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        (
            "x<a",
            'unable to parse requirement: values[0]: Invalid value: "a": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        (
            # kubectl prints this one for `-l app:monolith`
            "app:monolith",
            'unable to parse requirement: <nil>: Invalid value: "app:monolith": name part must '
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "Example.com/a",
            'unable to parse requirement: <nil>: Invalid value: "Example.com/a": prefix part a '
            "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
            "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
            "regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "/a",
            'unable to parse requirement: <nil>: Invalid value: "/a": '
            "prefix part must be non-empty",
        ),
        (
            "a" * 64,
            f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": '
            "name part must be no more than 63 bytes",
        ),
    ],
)
def test_bad_label_selectors_are_refused_with_kube_words(text: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        selectors.parse_labels(text)
    assert caught.value.code == 400
    assert caught.value.status["reason"] == "BadRequest"
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "text",
    [
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",
        "a notin(",
        "a (",
        "(",
    ],
)
def test_more_bad_label_selectors_from_kube(text: str) -> None:
    with pytest.raises(ApiError):
        selectors.parse_labels(text)


def test_a_key_with_two_slashes_is_refused() -> None:
    with pytest.raises(ApiError) as caught:
        selectors.parse_labels("a/b/c=d")
    assert "a valid label key must consist of" in str(caught.value)
    assert str(caught.value).endswith(
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    )


def test_several_bad_values_are_listed_together() -> None:
    with pytest.raises(ApiError) as caught:
        selectors.parse_labels("x in (a@b,c@d)")
    assert str(caught.value).startswith(
        'unable to parse requirement: [values[0][x]: Invalid value: "a@b"'
    )
    assert 'values[1][x]: Invalid value: "c@d"' in str(caught.value)


def test_parsed_requirements() -> None:
    parsed = selectors.parse_labels("x notin (abc,,def),bar,z in (),w, tier in (web,in)")
    assert parsed.requirements == (
        Requirement("bar", "exists"),
        Requirement("tier", "in", ("in", "web")),
        Requirement("w", "exists"),
        Requirement("x", "notin", ("", "abc", "def")),
        Requirement("z", "in", ("",)),
    )
    assert selectors.parse_labels("x notin (abc,def)").requirements == (
        Requirement("x", "notin", ("abc", "def")),
    )
    assert selectors.parse_labels("x notin (, a)").requirements == (
        Requirement("x", "notin", ("", "a")),
    )
    assert selectors.parse_labels("a in (x,y,notin, z,in)").requirements == (
        Requirement("a", "in", ("in", "notin", "x", "y", "z")),
    )
    assert selectors.parse_labels("!canary").requirements == (Requirement("canary", "!"),)
    assert selectors.parse_labels("a==b,c!=d").requirements == (
        Requirement("a", "==", ("b",)),
        Requirement("c", "!=", ("d",)),
    )


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("z>1", {"z": "v2"}, False),
        ("x>1", {}, False),
        # notin and != match a missing label
        ("x notin (a)", {}, True),
        ("x!=a", {}, True),
        ("x notin (a)", {"x": "a"}, False),
        ("x in (a,b)", {"x": "b"}, True),
        ("x in (a,b)", {}, False),
        # the empty value
        ("x in ()", {"x": ""}, True),
        ("x in ()", {"y": "baz"}, False),
        ("x=", {"x": ""}, True),
        ("x notin (),y", {"y": ""}, True),
        ("x notin (),!y", {"y": ""}, False),
    ],
)
def test_label_matching(text: str, labels: dict[str, str], matches: bool) -> None:
    assert selectors.parse_labels(text).matches(labels) is matches


def test_empty_label_selector_is_everything() -> None:
    assert selectors.parse_labels("").empty
    assert selectors.parse_labels(None).matches({})
    assert not selectors.parse_labels("a").empty


# --- fields -----------------------------------------------------------------------------------

POD = {
    "metadata": {"name": "web-1", "namespace": "demo", "labels": {"app": "web"}},
    "spec": {"nodeName": "n1", "hostNetwork": False, "priority": 5},
    "status": {"phase": "Running"},
}
EVENT = {"metadata": {"name": "e1"}, "involvedObject": {"name": "web-1", "kind": "Pod"}}


def test_field_values_from_a_raw_object() -> None:
    assert selectors.field_value(POD, "metadata.name") == "web-1"
    assert selectors.field_value(POD, "status.phase") == "Running"
    assert selectors.field_value(POD, "spec.hostNetwork") == "false"
    assert selectors.field_value(POD, "spec.priority") == "5"
    assert selectors.field_value(POD, "spec.missing") == ""
    assert selectors.field_value(POD, "metadata.name.deeper") == ""
    assert selectors.field_value(POD, "metadata.labels") == ""
    assert selectors.field_value(EVENT, "involvedObject.name") == "web-1"


@pytest.mark.parametrize(
    ("text", "obj", "matches"),
    [
        ("", POD, True),
        ("metadata.name=web-1", POD, True),
        ("metadata.name==web-1", POD, True),
        ("metadata.name!=web-1", POD, False),
        ("status.phase!=Running", POD, False),
        ("status.phase!=Pending,spec.nodeName=n1", POD, True),
        ("spec.nodeName=", POD, False),
        ("spec.schedulerName=", POD, True),  # missing reads as ""
        ("spec.schedulerName!=", POD, False),
        ("involvedObject.name=web-1,involvedObject.kind=Pod", EVENT, True),
        ("metadata.namespace=demo,metadata.name=web-2", POD, False),
    ],
)
def test_field_matching(text: str, obj: dict[str, object], matches: bool) -> None:
    assert selectors.parse_fields(text).matches(obj) is matches


def test_field_escapes() -> None:
    # fields/selector_test.go: `complex` is `=value\,\`
    obj = {"complex": "=value\\,\\", "foo": "bar"}
    assert selectors.parse_fields("foo=bar,complex=\\=value\\\\\\,\\\\").matches(obj)
    assert selectors.parse_fields("x=a||y\\=b").requirements == (FieldRequirement("x", "a||y=b"),)
    assert selectors.parse_fields("x=a\\=\\=b").requirements == (FieldRequirement("x", "a==b"),)
    assert set(selectors.parse_fields("k=\\,,k2=v2").requirements) == {
        FieldRequirement("k", ","),
        FieldRequirement("k2", "v2"),
    }
    assert set(selectors.parse_fields("함=수,목=록").requirements) == {
        FieldRequirement("목", "록"),
        FieldRequirement("함", "수"),
    }


def test_empty_field_terms_are_skipped() -> None:
    assert selectors.parse_fields("a=a,").requirements == (FieldRequirement("a", "a"),)
    assert selectors.parse_fields(",a=a").requirements == (FieldRequirement("a", "a"),)
    assert selectors.parse_fields(None).empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "invalid selector: 'x'; can't understand 'x'"),
        ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
        ("x in (a)", "invalid selector: 'x in (a)'; can't understand 'x in (a)'"),
        ("x=a||y=b", "invalid field selector: unescaped character in value: 61"),
        ("x==a==b", "invalid field selector: unescaped character in value: 61"),
        ("x=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("x=\\a", "invalid field selector: invalid escape sequence: \\a"),
        ("x=\\\\\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_bad_field_selectors_are_refused_with_kube_words(text: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        selectors.parse_fields(text)
    assert caught.value.code == 400
    assert str(caught.value) == message


def test_field_paths_and_supported_fields() -> None:
    parsed = selectors.parse_fields("status.phase!=Running,metadata.name=web,metadata.name=x")
    assert selectors.field_paths(parsed) == {"status.phase", "metadata.name"}
    parsed.require_supported({"metadata.name", "metadata.namespace", "status.phase"})
    with pytest.raises(ApiError) as caught:
        parsed.require_supported({"metadata.name"})
    assert str(caught.value) == "field label not supported: status.phase"
