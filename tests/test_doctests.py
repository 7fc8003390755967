"""Every docstring example in the engine and in the dashboard's non-page modules runs and gives what it shows:
an example that went stale is a failing test, not a misleading page of documentation."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    names = []
    for pkg in ("talos_core", "dashboard"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if "app_pages" in rel.parts or rel.parts[-1] == "app":  # Streamlit pages run at import
                continue
            if ">>>" not in path.read_text(encoding="utf-8"):
                continue
            parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
            names.append(".".join(parts))
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_hold(name, one_thread):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} fail"
