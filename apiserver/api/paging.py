"""`limit`/`continue` paging and the resourceVersion of a list stitched from many clusters.

kubectl pages every `get` (`limit=500`) and clients resume a list with the opaque `continue`
token they got. Our lists are assembled in memory from several clusters, with no etcd keys to
resume from, so the token names the key to start at — (namespace, name, location), the order
the items are served in — like etcd's range keys: objects created or deleted between two
pages never make the next page skip or repeat one that was there all along.

A stitched list has no single resourceVersion either: one per location. `composite_version`
folds them into one opaque string a client hands back unchanged (`watch=true&resourceVersion=…`)
so that every child's watch resumes where its list ended.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from apiserver.api import errors, requestinfo
from apiserver.contract import LOCATION
from apiserver.kube.client import ApiError
from apiserver.objects import Obj

TOKEN_VERSION = 1

Key = tuple[str, str, str]
T = TypeVar("T")

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def sort_key(obj: Obj) -> Key:
    """(namespace, name, location): the order list items are served in."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return (
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
        str(annotations.get(LOCATION) or ""),
    )


@dataclass(frozen=True)
class Continue:
    """A decoded `continue` token: the list's resourceVersion and the key to start at."""

    resource_version: str
    start: Key


def encode_continue(token: Continue) -> str:
    payload = {"v": TOKEN_VERSION, "rv": token.resource_version, "start": list(token.start)}
    return _b64encode(json.dumps(payload, separators=(",", ":")).encode())


def decode_continue(text: str) -> Continue:
    """A token this server made, or a 400 like kube-apiserver's for a bad one."""
    try:
        payload = json.loads(_b64decode(text))
    except ValueError as err:  # bad base64, bad UTF-8, bad JSON
        raise _invalid_continue(str(err)) from None
    if not isinstance(payload, dict) or payload.get("v") != TOKEN_VERSION:
        raise _invalid_continue("server does not recognize this encoded version")
    rv, start = payload.get("rv"), payload.get("start")
    if (
        not isinstance(rv, str)
        or not isinstance(start, list)
        or len(start) != 3
        or not all(isinstance(part, str) for part in start)
    ):
        raise _invalid_continue("incorrect encoded start key")
    return Continue(rv, (start[0], start[1], start[2]))


def _invalid_continue(why: str) -> ApiError:
    return errors.bad_request(f"invalid continue token: continue key is not valid: {why}")


def page(
    items: Sequence[T],
    limit: int | None,
    continue_token: str | None,
    resource_version: str,
    key: Callable[[T], Key] = sort_key,  # type: ignore[assignment]
) -> tuple[list[T], str, int | None]:
    """One page: (items, the next `continue` token or "", remainingItemCount or None).

    Items are sorted here by `key` (objects: their `sort_key`); a token resumes at the first
    item after the last one served, and carries the first page's resourceVersion along.
    `limit` None or <= 0: everything."""
    ordered = sorted(items, key=key)
    if continue_token:
        token = decode_continue(continue_token)
        resource_version = token.resource_version
        ordered = [item for item in ordered if key(item) >= token.start]
    if not limit or limit <= 0 or len(ordered) <= limit:
        return ordered, "", None
    served, rest = ordered[:limit], ordered[limit:]
    namespace, name, location = key(served[-1])
    # The smallest key greater than the last one served: anything created after it shows up.
    after = (namespace, name, location + "\x00")
    return served, encode_continue(Continue(resource_version, after)), len(rest)


def limit_of(query: Mapping[str, str]) -> int | None:
    """The `limit` parameter (None when absent); not an integer: 400 like ListOptions."""
    return requestinfo.int64_option(query, "limit")


# --- composite resourceVersions ---------------------------------------------------------------


def composite_version(versions: Mapping[str, str]) -> str:
    """One opaque resourceVersion for {location: resourceVersion} (URL-safe, no spaces)."""
    payload = json.dumps(dict(sorted(versions.items())), separators=(",", ":"))
    return _b64encode(payload.encode())


def parse_composite(text: str) -> dict[str, str]:
    """{location: resourceVersion} back; "" and "0" mean "from now / any": {}."""
    if text in ("", "0"):
        return {}
    try:
        payload: Any = json.loads(_b64decode(text))
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in payload.items()
    ):
        raise errors.bad_request(f"invalid resource version {errors.quote(text)}")
    return dict(payload)


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    if not _BASE64URL.fullmatch(text):
        raise ValueError("illegal base64 data")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as err:
        raise ValueError(f"illegal base64 data: {err}") from None
