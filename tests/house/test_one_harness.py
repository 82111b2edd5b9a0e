"""One way to assemble and drive a run: the job, `semcl check`, `semcl doctor` and the GPU check all import the run
harness (semcl.engine.harness), and nothing else reaches past it to the loop (`train`) or the builders
(`build_method`, `method_class`, `data_splits` of semcl.engine.build). Read off the source (AST): a lazy import
counts. The loop itself stays short: train() at most 80 lines (signature and docstring included) and 6 parameters."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "semcl"
DRIVERS = [SRC / "engine" / "job.py", SRC / "preflight" / "check.py", SRC / "launch" / "slurm" / "doctor" / "steps.py",
           ROOT / "scripts" / "gpucheck" / "rows.py"]
HARNESS = "semcl.engine.harness"
# what only the harness may take from the engine: the loop and the ways to build a run's method and data
ASSEMBLY = {"semcl.engine.train": {"train"},
            "semcl.engine.build": {"build_method", "method_class", "data_splits", "data_info"}}


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    """(module, names) of every import in `path`, at any depth (`import a.b` gives ('a.b', set()))."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, {a.name for a in node.names}))
        elif isinstance(node, ast.Import):
            out += [(a.name, set()) for a in node.names]
    return out


def _python_files() -> list[Path]:
    return sorted([*SRC.rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])


def test_the_job_the_preflight_the_doctor_and_the_gpu_check_import_the_same_harness():
    for path in DRIVERS:
        modules = {module for module, _ in _imports(path)}
        assert HARNESS in modules, f"{path.relative_to(ROOT)} does not drive the run harness ({HARNESS})"
    gpu_check = [p for p in (ROOT / "scripts" / "gpucheck").glob("*.py")
                 if any(m == "gpucheck.rows" and "build" in names for m, names in _imports(p))]
    assert {p.name for p in gpu_check} >= {"pace.py", "precision.py", "resume.py"}  # through rows.build


def test_nothing_but_the_harness_assembles_a_run():
    allowed = {SRC / "engine" / "harness.py", SRC / "engine" / "build.py", SRC / "engine" / "train.py"}
    offenders = []
    for path in _python_files():
        if path in allowed:
            continue
        for module, names in _imports(path):
            taken = ASSEMBLY.get(module, set()) & names
            if taken or (module in ASSEMBLY and not names):
                offenders.append(f"{path.relative_to(ROOT)}: {module} {sorted(taken) or '(whole module)'}")
    assert offenders == []


def test_train_is_at_most_80_lines_with_at_most_6_parameters():
    tree = ast.parse((SRC / "engine" / "train.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    a = fn.args
    params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
    assert fn.end_lineno - fn.lineno + 1 <= 80
    assert params <= 6
