"""No import cycle anywhere in src/semcl, read off the source (AST), not off a running interpreter.

Every `import` / `from ... import` counts, at module level or inside a function (a lazy import is
still a dependency: it is how semcl.data.augment and semcl.data.tvaugment used to import each
other); only `if TYPE_CHECKING:` blocks are skipped, since they never run. `from pkg import name`
is an edge to `pkg.name` when that is a module, else to `pkg` (its __init__). The implicit import
of a parent package is not an edge (every submodule would otherwise "import" its package).
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


def test_no_import_cycle_in_semcl() -> None:
    graph = import_graph(SRC)
    assert "semcl.data.registry" in graph and "semcl.engine.job" in graph  # the walk saw the tree
    assert "semcl.data.augment" in graph["semcl.data.views"]
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
    code = ("import sys, semcl.data, semcl.data.registry, semcl.runs; semcl.data.stats('cifar10'); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'torchvision')); "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
