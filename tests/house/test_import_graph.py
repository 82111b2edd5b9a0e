"""No import cycle anywhere in src/semcl, read off the source (AST), not off a running interpreter.

Every `import` / `from ... import` counts, at module level or inside a function (a lazy import is
still a dependency: it is how semcl.data.views.augment and semcl.data.views.tvaugment used to import each
other); only `if TYPE_CHECKING:` blocks are skipped, since they never run. `from pkg import name`
is an edge to `pkg.name` when that is a module, else to `pkg` (its __init__). The implicit import
of a parent package is not an edge (every submodule would otherwise "import" its package).

No module imports one from a layer above it (the same edges). The layers, lowest first (LAYER_ORDER;
LAYERS places each module by its longest dotted prefix, a package covering its submodules):

  base     errors, files, schema, yaml_strict, locations, store/ (the results root, the run folder, finished
           records), runtime/ (checkpoint files, signals, progress, history, trackers, process groups, the run lock),
           analysis/: know nothing of runs' configs or networks
  config   the run-config schema (semcl.config) and the precision settings read off it (runtime.precision)
  data, models, losses   the pieces a method is built from
  methods, evals         methods and evaluation protocols (they share: stage pooling, detection transfer)
  plan     registry/ (table entries, resources, the index, the planner: runs and their ids), run_config,
           estimate/, snapshot
  engine   build a run, train, evaluate, job, export: above plan, since a job executes a planned run (runs.Run)
  launch   launch/ (the Backend interface, local and SLURM backends, shared trainings), preflight/
  report   tables, figures, claims, the numbers overlay, file trails
  publish  bundles of finished runs (model-index, safetensors weights, SHA256SUMS) and their check
  cli      cli/ (one module per command group) and the Python API

A lazy import is an edge too, so an upward one cannot hide inside a function; an edge being removed
goes into KNOWN (module, module) with a comment until it is gone.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import semcl

SRC = Path(semcl.__file__).parent


def _modules(package_dir: Path) -> dict[str, Path]:
    top = package_dir.parent
    out = {}
    for f in sorted(package_dir.rglob("*.py")):
        parts = f.relative_to(top).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imported_names(tree: ast.AST, package: str) -> list[str]:
    """Dotted names every import statement of `tree` asks for (relative ones resolved)."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names.extend(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    modules = _modules(package_dir)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for name in _imported_names(ast.parse(path.read_text(), str(path)), package):
            while name and name not in modules:  # `from pkg import attr` -> pkg
                name = name.rpartition(".")[0]
            if name and name != mod:
                graph[mod].add(name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (iterative depth-first search, modules in sorted order)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


LAYER_ORDER = ["base", "config", "data/models/losses", "methods/evals", "plan", "engine", "launch", "report", "publish",
               "cli"]
LAYERS: dict[str, str] = {
    **dict.fromkeys(["semcl", "semcl.errors", "semcl.files", "semcl.schema", "semcl.yaml_strict", "semcl.locations",
                     "semcl.store", "semcl.csv_files", "semcl.runtime", "semcl.analysis"], "base"),
    **dict.fromkeys(["semcl.config", "semcl.runtime.precision"], "config"),
    **dict.fromkeys(["semcl.data", "semcl.models", "semcl.losses"], "data/models/losses"),
    **dict.fromkeys(["semcl.methods", "semcl.evals"], "methods/evals"),
    **dict.fromkeys(["semcl.run_config", "semcl.estimate", "semcl.registry", "semcl.snapshot"], "plan"),
    "semcl.engine": "engine",
    **dict.fromkeys(["semcl.launch", "semcl.preflight"], "launch"),
    "semcl.report": "report",
    "semcl.publish": "publish",
    **dict.fromkeys(["semcl.cli", "semcl.api"], "cli"),
}
# upward edges still being removed, each with why; delete an entry once its edge is gone (the test says so).
# Empty now: semcl.config imports nothing above it. Were the evaluation settings (issue 28, item 2) to leave
# an edge for a while, it goes here, e.g. ("semcl.config", "semcl.evals.protocols").
KNOWN: set[tuple[str, str]] = set()


def layer_of(module: str, layers: dict[str, str]) -> str | None:
    """The layer of `module`'s longest prefix in `layers` (None: not placed)."""
    name = module
    while name and name not in layers:
        name = name.rpartition(".")[0]
    return layers.get(name)


def upward_imports(graph: dict[str, set[str]], layers: dict[str, str], order: list[str]) -> list[str]:
    """"a (layer) -> b (layer)" for every edge into a higher layer, sorted."""
    rank = {name: i for i, name in enumerate(order)}
    return sorted(f"{a} ({layer_of(a, layers)}) -> {b} ({layer_of(b, layers)})" for a, bs in graph.items() for b in bs
                  if rank[layer_of(b, layers)] > rank[layer_of(a, layers)] and (a, b) not in KNOWN)


def test_no_import_cycle_in_semcl() -> None:
    graph = import_graph(SRC)
    assert "semcl.data.registry" in graph and "semcl.engine.job" in graph  # the walk saw the tree
    assert "semcl.data.views.augment" in graph["semcl.data.views.build"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.c import C\n")
    (pkg / "a.py").write_text("def f():\n    from . import b  # lazy, relative\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\nimport pkg.sub\n")
    (pkg / "sub" / "c.py").write_text("import os\nC = 1\n")
    graph = import_graph(pkg)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub"}, "pkg.sub": {"pkg.sub.c"},
                     "pkg.sub.c": set()}
    assert find_cycle(graph) is None
    (pkg / "sub" / "c.py").write_text("C = 1\ndef g():\n    from pkg.a import f\n")  # pkg.a -> b -> sub -> c -> a
    assert find_cycle(import_graph(pkg)) == ["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.a"]


def test_data_package_and_registry_import_without_torch() -> None:
    code = ("import sys, semcl.data, semcl.data.registry, semcl.registry.plan; semcl.data.stats('cifar10'); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'torchvision')); "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_no_module_imports_from_a_layer_above() -> None:
    graph = import_graph(SRC)
    assert set(LAYERS.values()) == set(LAYER_ORDER)
    unplaced = sorted(m for m in graph if layer_of(m, LAYERS) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"
    assert all(b in graph.get(a, ()) for a, b in KNOWN), "a KNOWN edge is gone: delete its entry"
    assert layer_of("semcl.engine.job", LAYERS) == "engine" and layer_of("semcl.runtime.checkpoint", LAYERS) == "base"
    assert layer_of("semcl.data.views.clip_augment", LAYERS) == "data/models/losses"
    bad = upward_imports(graph, LAYERS, LAYER_ORDER)
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_an_upward_import_is_caught_even_when_lazy(tmp_path: Path) -> None:
    # a copy of the real names: config lazily importing the engine's job, the way build_config once
    # imported the method registry from the schema layer
    top = tmp_path / "semcl"
    (top / "engine").mkdir(parents=True)
    (top / "__init__.py").write_text("")
    (top / "errors.py").write_text("")
    (top / "engine" / "__init__.py").write_text("")
    (top / "engine" / "checkpoint.py").write_text("from semcl import errors\n")
    (top / "engine" / "job.py").write_text("from semcl.config import RunConfig\nfrom semcl.engine import checkpoint\n")
    (top / "config.py").write_text("from semcl.errors import x\nRunConfig = 1\n")
    assert upward_imports(import_graph(top), LAYERS, LAYER_ORDER) == []
    (top / "config.py").write_text("RunConfig = 1\ndef f():\n    from .engine import job\n")
    assert upward_imports(import_graph(top), LAYERS, LAYER_ORDER) == ["semcl.config (config) -> semcl.engine.job (engine)"]
