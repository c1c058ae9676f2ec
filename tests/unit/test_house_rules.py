"""#30's rules that import-linter cannot state, held by the same code that measured them
(`hack/house_figures.py`): no module outside `apiserver/kinds/` tests a kind by its name, and
the server keeps no per-kind table outside it (the plugin may: it cannot import the server)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _house_figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house_figures", ROOT / "hack/house_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def test_no_kind_is_tested_by_name_and_the_server_has_no_kind_table_outside_the_kinds() -> None:
    figures = _house_figures().measure(ROOT)
    assert figures.kind_tests == []
    assert [t for t in figures.kind_tables if t.startswith("apiserver/")] == []
