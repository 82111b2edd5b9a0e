"""The launching seam: every executor `semcl run` offers is a Backend class in BACKENDS; the CLI calls the
interface only (a toy backend defined in this file plans and submits through it), and no module outside
launch/ names a backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from semcl.cli import main as cli
from semcl.errors import ConfigError
from semcl.launch import backends as launch_backends
from semcl.launch.backends import BACKENDS, backend
from semcl.launch.base import Backend

SRC = Path(__file__).resolve().parents[2] / "src" / "semcl"


def _executor_choices(command: str) -> set[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(next(a for a in sub.choices[command]._actions if a.dest == "executor").choices)


def test_every_executor_of_run_and_plan_is_a_backend_class():
    assert _executor_choices("run") == _executor_choices("plan") == set(BACKENDS) == {"local", "debug", "slurm"}
    for name in BACKENDS:
        be = backend(name)
        assert isinstance(be, Backend) and be.name == name
    assert backend("slurm").needs_preflight and backend("slurm").previews_layout
    assert not backend("local").needs_preflight and not backend("debug").previews_layout


def test_an_unknown_executor_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"^unknown executor 'pbs'; known: \['debug', 'local', 'slurm'\]$"):
        backend("pbs")


def test_no_module_outside_launch_names_a_backend():
    named = []
    for path in sorted(SRC.rglob("*.py")):
        if "launch" in path.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in BACKENDS:
                named.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert named == []


# ---- a toy backend: this class plus one line in BACKENDS ------------------------------------------------

SEEN: dict[str, list] = {"submit": [], "preview": []}


class ToyBackend(Backend):
    name = "toy"
    previews_layout = True

    def submit(self, runs, store, options):
        SEEN["submit"].append(([r.run_id for r, _ in runs], options))

    def preview(self, runs, store, cluster):
        SEEN["preview"].append([r.run_id for r, _ in runs])
        gpus = sorted({res.gpus for _, res in runs})
        return f"# toy layout: {len(runs)} runs on cluster {cluster}, gpus {gpus}"

    def states(self, store, runs):
        return {runs[0].run_id: ("pending", "toy job 7 PENDING")} if runs else {}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(BACKENDS, "toy", f"{__name__}:ToyBackend")
    SEEN["submit"].clear()
    SEEN["preview"].clear()


def test_a_toy_backend_plans_submits_and_reports_through_the_interface(toy, tmp_path, capsys, monkeypatch):
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    want = [r.run_id for r in plan_runs(get_table("rince/tab9"), "smoke")]
    assert cli.main(["--results", str(tmp_path), "plan", "rince/tab9", "--profile", "smoke", "--executor", "toy",
                     "--cluster", "c1"]) == 0
    out = capsys.readouterr().out
    assert SEEN["preview"] == [want]
    assert f"# toy layout: {len(want)} runs on cluster c1, gpus [0]" in out
    assert all(run_id in out for run_id in want)

    monkeypatch.setattr(launch_backends, "check_data_root", lambda runs, root: None)
    assert cli.main(["--results", str(tmp_path), "run", "rince/tab9", "--profile", "smoke", "--executor", "toy",
                     "--data-root", str(tmp_path / "data"), "--workers", "3"]) == 0
    (ids, options), = SEEN["submit"]
    assert ids == want and options.workers == 3 and options.data_root == tmp_path / "data"

    assert cli.main(["--results", str(tmp_path), "status", "rince/tab9", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert f"{want[0]}" in out and "toy job 7 PENDING" in out and "pending: 1" in out
