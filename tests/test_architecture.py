"""Architecture rules: imports of ``talos_core``, ``dashboard`` and ``bench`` point down the layers of the data path
(``LAYERS``; no cycles), and nothing edits ``sys.path`` to find the project's own packages."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def import_edges() -> dict[str, list[tuple[str, int]]]:
    """Module → ``(project module it imports, line)`` for every import (module level or inside a function),
    ``from pkg import sub`` as an import of ``pkg.sub``, and relative imports."""
    mods = _modules()
    edges: dict[str, list[tuple[str, int]]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: list[tuple[str, int]] = []
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
                if target and target != name and (target, node.lineno) not in found:
                    found.append((target, node.lineno))
        edges[name] = found
    return edges


def import_graph() -> dict[str, set[str]]:
    """Module → project modules it imports (see :func:`import_edges`)."""
    return {name: {target for target, _ in found} for name, found in import_edges().items()}


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


#: the layers of the project, bottom to top: a module imports modules of its own layer or of a layer below it, never
#: above. A module belongs to the layer that names it or its longest enclosing package; siblings that do not import
#: each other share a layer. Where a lower module needs a higher one's data, the caller passes it in.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("talos_core", "talos_core._torchvision_guard", "talos_core.errors", "talos_core.atomic",
                    "talos_core.memory", "talos_core.hardware", "talos_core.provenance")),
    # the method declarations: data the catalogue is derived from, torch-free (their runners: RUNNER_HOOKS)
    ("declarations", tuple(f"talos_core.methods.{m}" for m in (
        "declaration", "finetuning", "registry", "ties", "dare", "breadcrumbs", "tall", "tsv", "iso", "lines",
        "della"))),
    # the store's format, torch-free: engine and dashboard read through it
    ("schema", ("talos_core.schema", "talos_core.result_arrays")),
    ("tasks", ("talos_core.tasks",)),
    ("models", ("talos_core.models",)),  # a model family builds its heads from a task's classes
    ("vectors", ("talos_core.vectors",)),
    ("methods", ("talos_core.methods",)),  # the post-hoc merges' tensor functions, over task vectors
    ("inference", ("talos_core.inference",)),  # θ0 + Σ α τ, JVPs, precision, the tally of passes
    ("masks", ("talos_core.fisher", "talos_core.masks")),  # Fisher scores and TaLoS calibration
    ("training", ("talos_core.batching", "talos_core.training")),
    ("runners", ("talos_core.runners",)),  # how each fine-tuning method trains (named by its declaration)
    ("store", ("talos_core.manifest", "talos_core.store")),
    ("runs", ("talos_core.pipeline", "talos_core.importing")),  # one run end to end, or one imported checkpoint
    ("evaluation", ("talos_core.evaluation",)),
    ("orchestration", ("talos_core.suites", "talos_core.export_model")),
    ("docs", ("talos_core.docblocks",)),  # the generated blocks read the suites' reports
    ("cli", ("talos_core.cli",)),
    ("dashboard", ("dashboard",)),  # launched by `talos dashboard` as a Streamlit script, never imported by it
    ("bench", ("bench",)),
)


def layer_of(module: str, layers=LAYERS) -> int:
    """Index in ``layers`` of the entry naming ``module`` or its longest enclosing package."""
    best, index = "", -1
    for i, (_, names) in enumerate(layers):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    # the root package's entry is the module talos_core/__init__.py only, not a catch-all for new modules
    if index < 0 or (best == "talos_core" and module != best):
        raise AssertionError(f"{module} is in no layer: add it or its package to LAYERS in tests/test_architecture.py")
    return index


#: (layer, package): a module of the layer may import the package's modules where the import only runs when the
#: method runs: inside a function (its runner) or under ``if TYPE_CHECKING:``. A post-hoc method's file holds both
#: its declaration (data the schema lists, so it sits low) and its runner (tensor code high up); the runner's imports
#: are deferred so that listing the catalogue never imports torch. An import of the package at module level is
#: still an upward import.
RUNNER_HOOKS: tuple[tuple[str, str], ...] = (("declarations", "talos_core.methods"),)


def module_level_import_lines(module: str) -> set[int]:
    """Lines of the imports that run when ``module`` is imported (not in a function, not under TYPE_CHECKING)."""
    tree = ast.parse(_modules()[module].read_text())
    lines: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                lines.add(node.lineno)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return lines


def _runner_hook(module: str, target: str, line: int, layer: str, hooks, module_level) -> bool:
    return any(layer == hook_layer and (target == pkg or target.startswith(pkg + "."))
               and line not in module_level(module) for hook_layer, pkg in hooks)


def upward_imports(edges: dict[str, list[tuple[str, int]]], layers=LAYERS, hooks=RUNNER_HOOKS,
                   module_level=module_level_import_lines) -> list[str]:
    """One line per import that runs up: ``module:line imports target (layer 'high' is above its layer 'low')``;
    the deferred imports of :data:`RUNNER_HOOKS` are not counted."""
    found = []
    for module in sorted(edges):
        own = layer_of(module, layers)
        for target, line in edges[module]:
            up = layer_of(target, layers)
            if up > own and not _runner_hook(module, target, line, layers[own][0], hooks, module_level):
                found.append(f"{module}:{line} imports {target} (layer '{layers[up][0]}' is above its layer "
                             f"'{layers[own][0]}')")
    return found


def test_graph_sees_function_local_and_relative_imports(tmp_path):
    assert "talos_core.errors" in import_graph()["talos_core.schema"]


def test_every_module_is_in_a_layer():
    for module in import_graph():
        layer_of(module)


def test_imports_point_down_the_layers():
    found = upward_imports(import_edges())
    assert not found, "imports that run up the layers (LAYERS in tests/test_architecture.py):\n" + "\n".join(found)


def test_layer_check_finds_an_upward_import():
    layers = (("low", ("p.a",)), ("high", ("p.b",)))
    edges = {"p.a": [("p.b.x", 7)], "p.b.x": [("p.a", 3)]}
    assert upward_imports(edges, layers) == ["p.a:7 imports p.b.x (layer 'high' is above its layer 'low')"]
    # a runner hook excuses a deferred import (not at module level), never a module-level one
    hooks = (("low", "p.b"),)
    assert upward_imports(edges, layers, hooks, module_level=lambda m: set()) == []
    assert upward_imports(edges, layers, hooks, module_level=lambda m: {7}) == [
        "p.a:7 imports p.b.x (layer 'high' is above its layer 'low')"]


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
