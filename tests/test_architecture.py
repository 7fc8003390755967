"""Architecture rules: imports of ``talos_core``, ``dashboard`` and ``bench`` point down the data path (no cycles),
and nothing edits ``sys.path`` to find the project's own packages."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("talos_core", "dashboard", "bench")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module → project modules it imports, counting every import (module level or inside a function),
    ``from pkg import sub`` as an import of ``pkg.sub``, and relative imports."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                # the longest project module that the dotted name starts with
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_graph_sees_function_local_and_relative_imports(tmp_path):
    assert "talos_core.errors" in import_graph()["talos_core.schema"]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


#: the orchestration package ``talos_core/suites/``, bottom to top: each module imports only modules before it (its
#: ``__init__`` re-exports the public names of specs, steps, run and report)
SUITES_LAYERS = ("costs", "specs", "steps", "workload", "executors", "plan", "run", "report")


def test_suites_package_imports_point_down_its_layers():
    graph = import_graph()
    pkg = "talos_core.suites"
    assert {m for m in graph if m.startswith(pkg + ".")} == {f"{pkg}.{n}" for n in SUITES_LAYERS}, \
        "talos_core/suites/ and SUITES_LAYERS name the same modules"
    for i, name in enumerate(SUITES_LAYERS):
        inside = {d for d in graph[f"{pkg}.{name}"] if d == pkg or d.startswith(pkg + ".")}
        above = inside - {f"{pkg}.{n}" for n in SUITES_LAYERS[:i]}
        assert not above, f"{pkg}.{name} imports {sorted(above)}, not below it in SUITES_LAYERS"


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_sys_path_edits():
    offenders = []
    for path in sorted(REPO.rglob("*.py")):
        if any(part.startswith(".") for part in path.relative_to(REPO).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("insert", "append", "extend") \
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "path" \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys":
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, f"sys.path edited in {offenders}"
