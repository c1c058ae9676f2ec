"""The one name for a Kubernetes object as we hold it: a raw dict, as the cluster sent it.

Objects of the hub and of the children are never round-tripped through generated models,
which drop the fields they do not know; only our own kinds are pydantic models
(`apiserver/models/`). Cached objects are shared and read-only (see `kube/informer.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
ReadOnly = Mapping[str, Any]  # an object we read and never change (cached, or as a child is seen)

NAMESPACE = "Namespace"  # the kind every namespaced object needs first, in any layer
