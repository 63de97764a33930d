"""Imports point one way, down the layers, and no modules import each other in a circle.

Every import inside the package, lazy ones included, goes to a module of the same layer or a lower
one, and no modules import each other in a circle (a circle inside a layer means two modules that
cannot be read, tested or changed apart). Layers, bottom to top:

0. schemas: run settings and sandbox limits, graph state, roles and token usage, seconds by phase,
   program records, program text (replies, edit forms, twins, docstrings, mechanical fixes)
1. services: memory, LLM access, prompts, the sandbox
2. tasks (their evaluators use the sandbox)
3. executors (run a task's evaluation locally or on Ray)
4. what the nodes share (resources, stop rules, the search policy, Generator requests), then the nodes
   (one per phase)
5. the graph builder (and the ``contextevolve.graph`` package, which re-exports it)
6. the Python API and the workers it drives (one LangGraph thread of the graph each), baselines, reports,
   the comparison with the peers, the live view
7. the command line
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "contextevolve"

LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (0, ("contextevolve.agents", "contextevolve.graph.context", "contextevolve.graph.settings",
         "contextevolve.graph.state", "contextevolve.graph.typed", "contextevolve.evaluation.limits",
         "contextevolve.memory.records",
         "contextevolve.roles", "contextevolve.timing", "contextevolve.program", "contextevolve.leftovers")),
    (1, ("contextevolve.memory", "contextevolve.llm", "contextevolve.prompts", "contextevolve.evaluation")),
    (2, ("contextevolve.tasks",)),
    (3, ("contextevolve.evaluation.executors",)),
    (4, ("contextevolve.loop", "contextevolve.nodes")),
    (5, ("contextevolve.graph",)),
    (6, ("contextevolve.api", "contextevolve.run_dir", "contextevolve.workers", "contextevolve.baselines",
         "contextevolve.report", "contextevolve.compare", "contextevolve.view")),
    (7, ("contextevolve.cli", "contextevolve.commands", "contextevolve.__main__", "contextevolve.flags",
         "contextevolve.display")),
]
"""Layer of each module: the longest matching prefix wins (``contextevolve.graph.state`` is 0,
``contextevolve.graph.builder`` is 5)."""


def layer(module: str) -> int:
    best = max(((len(prefix), level) for level, prefixes in LAYERS for prefix in prefixes
                if module == prefix or module.startswith(prefix + ".")), default=None)
    if best is None:
        raise AssertionError(f"{module} has no layer in tests/unit/test_layers.py: add it to LAYERS")
    return best[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """Modules of the package that ``path`` imports anywhere, or only at its top level.

    Anywhere is the top level, functions and TYPE_CHECKING blocks; the top level alone is what runs when
    it is imported.
    """
    found = set()
    tree = ast.parse(path.read_text())
    for node in (tree.body if top_level_only else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found.update(n for n in names if n.startswith("contextevolve"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("contextevolve"))
    return found


def existing(module: str) -> bool:
    rel = Path(*module.split("."))
    return ((PACKAGE.parent / rel).with_suffix(".py").exists()
            or (PACKAGE.parent / rel / "__init__.py").exists())


def package_inits(module: str) -> list[Path]:
    """The ``__init__.py`` of every package above ``module`` (Python runs them when it is imported)."""
    parts = module.split(".")
    return [PACKAGE.parent.joinpath(*parts[:n], "__init__.py") for n in range(2, len(parts))]


def test_imports_point_down_the_layers():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        for imported in sorted(imports(path)):
            if not existing(imported):  # ``from package import name`` of a function or class
                continue
            # importing a module runs its packages' __init__ first: their top-level imports count too
            implied = {m for init in package_inits(imported) for m in imports(init, top_level_only=True)}
            for target in sorted({imported} | {m for m in implied if existing(m)}):
                if layer(target) > layer(importer):
                    upward.append(f"{importer} (layer {layer(importer)}) imports {target} "
                                  f"(layer {layer(target)})"
                                  + ("" if target == imported else f", through {imported}'s package"))
    assert not upward, "imports pointing up:\n" + "\n".join(sorted(set(upward)))


def test_any_module_imports_first():
    """No import cycle at run time: a node module or a schema imports on its own, in a fresh interpreter."""
    import subprocess
    import sys

    for module in ("contextevolve.nodes.generate", "contextevolve.graph.context",
                   "contextevolve.nodes.repair"):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=PACKAGE.parent,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"import {module}: {done.stderr[-800:]}"


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import contextevolve.memory.records\n\n"
                   "def f():\n    from contextevolve.graph.builder import build_graph\n")
    assert imports(bad) == {"contextevolve.memory.records", "contextevolve.graph.builder",
                            "contextevolve.graph.builder.build_graph"}
    assert imports(bad, top_level_only=True) == {"contextevolve.memory.records"}
    assert layer("contextevolve.graph.builder") > layer("contextevolve.nodes.generate") > layer(
        "contextevolve.graph.state")


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere (lazy imports included)."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        graph[importer] = {m for m in imports(path) if existing(m) and m != importer}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_each_other_in_a_circle():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_check_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


MAX_LINES = 400
"""Longest module under contextevolve/: one a reader can take in at one sitting."""


def test_no_module_is_longer_than_max_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"
