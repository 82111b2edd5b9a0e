"""Reliability, round two (issue 27 items 7, 11, 12, 13): every user-facing file is written
temp-then-rename, the failures a user meets are one line naming the file (and the remedy), a
non-finite metric is refused, and the advice the tool gives clears the state it describes."""

from __future__ import annotations

import errno
import importlib
import io
import json
import math
import os
import stat
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from semcl import files
from semcl.cli.main import main
from semcl.csv_files import write_frame_csv
from semcl.errors import ResultsError
from semcl.evals.protocols import metric_key
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _no_temp_left(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


# ---- item 7: temp-then-rename everywhere --------------------------------------------------------------

def _refuse_rename(*a, **k):
    raise OSError(errno.EIO, "Input/output error (injected before the rename)")


def test_interrupted_text_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "t.md"
    files.write_text_atomic(path, "old\n")
    assert stat.S_IMODE(path.stat().st_mode) == files.file_mode()  # not mkstemp's 0600
    monkeypatch.setattr(files.os, "replace", _refuse_rename)
    with pytest.raises(OSError):
        files.write_text_atomic(path, "new " * 100_000)
    assert path.read_text() == "old\n"
    _no_temp_left(tmp_path)


def test_a_write_that_fails_midway_names_the_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "points.csv"
    write_frame_csv(path, pd.DataFrame({"x": [1, 2]}))

    def full_disk(f):
        f.write(b"x,y\n1,")
        raise OSError(errno.ENOSPC, "No space left on device")  # what f.write raises: no file name

    with pytest.raises(OSError) as err:
        files.write_atomic(path, full_disk)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert path.read_text() == "x\n1\n2\n"
    _no_temp_left(tmp_path)


def test_table_written_by_the_cli_survives_an_interrupted_rewrite(tmp_path, monkeypatch):
    code, _, _ = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    path = tmp_path / "tables" / "rince_tab2.smoke.md"
    assert code == 0
    old = path.read_text()
    assert old.startswith("**rince/tab2")
    monkeypatch.setattr(files.os, "replace", _refuse_rename)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2 and path.read_text() == old
    assert _one_line(err).startswith(f"semcl: error: {path}: Input/output error")
    _no_temp_left(path.parent)


def test_figure_png_is_replaced_whole_or_not_at_all(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = tmp_path / "f.png"
    files.save_figure_atomic(fig, path)
    png = path.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(TypeError):
        files.save_figure_atomic(fig, path, dpi="not a number")  # savefig fails after the temp file is open
    plt.close(fig)
    assert path.read_bytes() == png
    _no_temp_left(tmp_path)


@pytest.mark.parametrize("text", ["run_id: abc\nconfig:\n  model: {backbone: resnet", "", "- a\n- b\n"])
def test_truncated_teacher_config_is_one_line_naming_it(tmp_path, text):
    from semcl.methods.distill.teacher import run_backbone

    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ResultsError) as err:
        run_backbone(SimpleNamespace(run_dir=tmp_path, run_id="abc123"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'config.yaml'}: ")
    assert "move teacher run abc123's folder away to retrain it" in msg


def test_teacher_config_written_by_the_engine_reads_back(tmp_path):
    from semcl.methods.distill.teacher import run_backbone

    files.write_text_atomic(tmp_path / "config.yaml", "config:\n  model: {backbone: resnet8x4}\n  method: {}\n")
    assert run_backbone(SimpleNamespace(run_dir=tmp_path, run_id="x")) == "resnet8x4"


# ---- item 12: non-finite metrics ----------------------------------------------------------------------

def _stored_value(tmp_path: Path, value) -> tuple[Store, str, str]:
    table = get_table("rince/tab2")
    run = plan_runs(table, "smoke")[0]
    key = metric_key(table.columns[0], table.profile("smoke").substitute)
    store = Store(tmp_path)
    path = store.metrics_path(run.run_id)
    path.parent.mkdir(parents=True)
    # json.dumps writes NaN / Infinity, which json.loads reads back as floats
    path.write_text(json.dumps({"run_id": run.run_id, "metrics": {key: value}}))
    return store, run.run_id, key


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_metric_in_a_record_is_refused_by_table(tmp_path, value):
    store, run_id, key = _stored_value(tmp_path, value)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2
    assert _one_line(err) == (f"semcl: error: {store.metrics_path(run_id)}: key 'metrics.{key}' is {value!r}, "
                              "not a finite number; move the file away to rerun this run\n")


def test_non_finite_metric_is_refused_when_the_engine_records_it(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(ResultsError) as err:
        store.write_record("r1", {"run_id": "r1", "metrics": {"top1": 40.0, "ood": {"auroc": float("inf")}}})
    assert str(err.value) == (f"{store.metrics_path('r1')}: key 'metrics.ood.auroc' is inf, not a finite number: "
                              "the run's evaluation diverged or divided by zero; nothing recorded (its log says more)")
    assert not store.metrics_path("r1").exists()
    store.write_record("r1", {"run_id": "r1", "metrics": {"top1": 40.0, "acc_few": None}})  # null: not measured
    assert store.read_record("r1")["metrics"] == {"top1": 40.0, "acc_few": None}


def test_a_run_whose_evaluation_gives_nan_fails_with_the_key(ensemble_registry, tmp_path, monkeypatch):
    from semcl.engine.job import execute_run
    from semcl.methods.registry import method_spec

    store = Store(tmp_path)
    run = next(r for r in plan_runs(get_table("test/ensemble"), "smoke") if r.depends_on)
    module, _, name = method_spec(run.config.method.name).computes.partition(":")  # the ensemble's metrics
    monkeypatch.setattr(importlib.import_module(module), name, lambda cfg, deps: {"acc_overall": math.nan})
    with pytest.raises(ResultsError):
        execute_run(run, store, tmp_path)
    status, detail = store.status(run.run_id)
    assert status == "failed" and not store.metrics_path(run.run_id).exists()
    assert detail.startswith(f"ResultsError: {store.metrics_path(run.run_id)}: key 'metrics.acc_overall' is nan, "
                             "not a finite number: the run's evaluation diverged")


def test_an_empty_shot_group_is_null_not_nan():
    import torch

    from semcl.evals.protocols.accuracy import logit_metrics

    # 2 classes with 200 and 150 training images: both "many" (> 100), no medium or few class
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0], [1.0, 0.0]])
    m = logit_metrics(logits, torch.tensor([0, 1, 1, 0]), torch.tensor([200, 150]), ["paco"])
    assert m["acc_many"] == pytest.approx(100.0 * (1.0 + 0.5) / 2) and m["acc_overall"] == pytest.approx(75.0)
    assert m["acc_medium"] is None and m["acc_few"] is None


# ---- item 11: one line instead of a traceback ---------------------------------------------------------

def test_malformed_preset_is_one_line_naming_it(tmp_path):
    from semcl.errors import ConfigError
    from semcl.registry.tables import load_table

    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "broken.yaml").write_text("optim:\n  lr: [0.1\n  epochs: 3\n")
    table = tmp_path / "t.yaml"
    table.write_text(_with_preset(Path(get_table("rince/tab2").path).read_text(), "broken"))
    with pytest.raises(ConfigError) as err:
        load_table(table, presets)
    msg = str(err.value)
    assert "\n" not in msg and str(presets / "broken.yaml") in msg


def _with_preset(text: str, name: str) -> str:
    lines = [f"preset: {name}" if ln.startswith("preset:") else ln for ln in text.splitlines()]
    return "\n".join(lines) + "\n"


def _manifest(store: Store, name: str, text: str) -> Path:
    path = store.root / "manifests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_corrupt_or_foreign_manifest_is_skipped_with_one_warning_each(tmp_path):
    from semcl.launch.slurm import manifest
    store = Store(tmp_path)
    run = plan_runs(get_table("rince/tab2"), "smoke")[0]
    good = {"jobs": [{"job_id": "77_0", "run_id": run.run_id, "folder": str(tmp_path / "submitit" / "77_0")}]}
    _manifest(store, "20260101-000000-77.json", json.dumps(good))
    torn = _manifest(store, "20260101-000001-78.json", json.dumps(good)[:25])
    foreign = _manifest(store, "20260101-000002-79.json", json.dumps({"name": "someone else's"}))
    odd = _manifest(store, "20260101-000003-80.json", json.dumps({"jobs": [{"job_id": 5}]}))
    manifest._WARNED.clear()
    err = io.StringIO()
    with redirect_stderr(err):
        jobs = manifest.latest_jobs(store)
        manifest.latest_jobs(store)  # `wait` polls: each bad file is named once
    assert jobs[run.run_id]["job_id"] == "77_0" and len(jobs) == 1
    lines = err.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"semcl: warning: {torn}: not valid JSON (")
    assert lines[1].startswith(f"semcl: warning: {foreign}: not a semcl manifest (no 'jobs' list)")
    assert lines[2].startswith(f"semcl: warning: {odd}: key 'jobs[0]' is not a job entry")
    # status of a table keeps working (exit 0), naming the bad files on stderr
    manifest._WARNED.clear()
    code, out, err2 = _cli("--results", str(tmp_path), "status", "rince/tab1", "--profile", "smoke")
    assert code == 0 and "# rince/tab1 profile=smoke" in out and str(torn) in err2 and "Traceback" not in err2


def test_sbatch_refusal_is_one_line_with_sbatch_s_message(tmp_path, monkeypatch):
    import submitit
    from submitit.core.utils import FailedJobError

    from semcl.errors import SemclError
    from semcl.launch.slurm import submit as slurm_submit
    from semcl.launch.slurm.profile import load_cluster_profile

    def refuse(self, command):
        raise FailedJobError("sbatch: error: Batch job submission failed: Invalid account or account/partition "
                             "combination specified")

    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "snapshot.json").write_text(json.dumps({"commit": "c", "dirty": False}))
    monkeypatch.setattr(submitit.SlurmExecutor, "_submit_command", refuse)
    # sbatch is faked, so no SLURM tools are needed here: submitit only asks that srun exists
    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    monkeypatch.setattr("semcl.snapshot.make_snapshot", lambda root: snap)
    monkeypatch.setattr(slurm_submit, "prepare_synthetic_data", lambda todo, store: None)
    monkeypatch.setattr(slurm_submit, "max_array_size", lambda: 1001)  # scontrol waits ~10 s for no controller
    table = get_table("rince/tab1")
    pairs = [(r, table.resources_for(r.row_label, "smoke")) for r in plan_runs(table, "smoke")]
    with pytest.raises(SemclError) as err:
        slurm_submit.submit_slurm(pairs, Store(tmp_path), tmp_path, load_cluster_profile("local"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"sbatch refused the array of {len(pairs)} run(s) of rince/tab1 (smoke): ")
    assert "sbatch: error: Batch job submission failed: Invalid account" in msg
    assert not (tmp_path / "manifests").exists()  # nothing was queued: no manifest claims it


def test_results_naming_a_file_is_one_line(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("not a folder")
    for command in (["status", "rince/tab1", "--profile", "smoke"], ["table", "rince/tab1", "--profile", "smoke"]):
        code, _, err = _cli("--results", str(f), *command)
        assert code == 2 and _one_line(err) == f"semcl: error: --results {f}: is a file, not a results folder\n"
    assert f.read_text() == "not a folder"


@pytest.mark.parametrize("flag, value", [("--poll", "-1"), ("--poll", "0"), ("--timeout", "-5"), ("--poll", "nan")])
def test_wait_refuses_non_positive_seconds(tmp_path, flag, value):
    code, _, err = _cli("--results", str(tmp_path), "wait", "rince/tab1", "--profile", "smoke", flag, value)
    assert code == 2 and f"argument {flag}: expected a positive number of seconds" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan"])
def test_bad_lock_stale_seconds_name_the_variable(monkeypatch, value):
    from semcl.errors import ConfigError
    from semcl.runtime.runlock import stale_after_s

    monkeypatch.setenv("SEMCL_LOCK_STALE_S", value)
    with pytest.raises(ConfigError) as err:
        stale_after_s()
    assert str(err.value) == (f"$SEMCL_LOCK_STALE_S = {value!r}: expected a positive number of seconds "
                              "(default 1800)")
    monkeypatch.setenv("SEMCL_LOCK_STALE_S", "90")
    assert stale_after_s() == 90.0


def _semcl(args: list[str], results: Path, **kw):
    import subprocess
    import sys

    env = {**os.environ, "SEMCL_RESULTS": str(results)}
    return subprocess.run([sys.executable, "-m", "semcl.cli", *args], capture_output=True, text=True, env=env, **kw)


def test_a_closed_pipe_exits_quietly(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(f"'{sys.executable}' -m semcl.cli --results '{tmp_path}' list | head -1", shell=True,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("table") and proc.stderr == ""


def test_file_size_limit_under_table_is_one_line(tmp_path):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))  # the rendered table is larger

    proc = _semcl(["table", "rince/tab2", "--profile", "smoke"], tmp_path, preexec_fn=limit)
    path = tmp_path / "tables" / "rince_tab2.smoke.md"
    assert proc.returncode == 2 and _one_line(proc.stderr) == (
        f"semcl: error: {path}: cannot write: the file would exceed this process's file-size limit (ulimit -f) "
        "(File too large)\n")
    assert not path.exists()
    _no_temp_left(path.parent)


def test_metrics_json_that_is_a_folder_is_one_line(tmp_path):
    run = plan_runs(get_table("rince/tab1"), "smoke")[0]
    store = Store(tmp_path)
    store.metrics_path(run.run_id).mkdir(parents=True)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab1", "--profile", "smoke")
    assert code == 2 and _one_line(err) == (f"semcl: error: {store.metrics_path(run.run_id)}: unreadable (Is a "
                                            "directory); move it away to rerun this run\n")


def test_full_disk_while_checkpointing_says_so_and_where(tmp_path, monkeypatch):
    import torch

    from semcl.cli.main import os_error_line
    from semcl.runtime import checkpoint
    path = tmp_path / "checkpoints" / "last.pt"
    checkpoint.save_atomic({"method": {"w": torch.zeros(3)}}, path)
    old = path.read_bytes()

    def short_write(state, f):  # what torch's zip writer raises when the disk fills mid-save
        f.write(b"PK\x03\x04partial")
        raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 94272 vs 94168")

    monkeypatch.setattr(checkpoint.torch, "save", short_write)
    with pytest.raises(OSError) as err:
        checkpoint.save_atomic({"method": {"w": torch.ones(3)}}, path)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert f"the disk holding {path.parent} is full or over quota (" in err.value.strerror
    assert "unexpected pos 94272 vs 94168" in err.value.strerror
    assert path.read_bytes() == old
    _no_temp_left(path.parent)
    line = os_error_line(err.value)
    assert "\n" not in line and line.startswith(f"{path}: cannot write: the disk is full or over quota")


def test_checkpoint_of_another_model_is_one_line_with_the_remedy(tmp_path):
    import torch
    from torch import nn

    from semcl.runtime.checkpoint import RESTART, restore

    ours = nn.Sequential(*[nn.Linear(4, 4) for _ in range(60)])  # 120 keys; torch lists each difference
    # layers 41-59 missing (38 keys); 0-39 convs (80 shapes differ), 40 a Linear(5, 4) (its weight differs)
    other = nn.Sequential(*[nn.Conv2d(3, 3, 1) for _ in range(40)], nn.Linear(5, 4))
    path = tmp_path / "last.pt"
    with pytest.raises(ResultsError) as err:
        restore(ours, other.state_dict(), path)
    assert str(err.value) == (f"{path}: a checkpoint of another model or config (38 missing keys (e.g. "
                              "'41.weight'), 81 shape mismatches (e.g. '0.weight')); " + RESTART)
    opt = torch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9).state_dict()
    with pytest.raises(ResultsError) as err:
        restore(opt, theirs, path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}: a checkpoint of another model")


# ---- item 13: advice that clears what it describes ----------------------------------------------------

def test_preflight_advice_names_the_profile_and_following_it_clears_the_refusal(ensemble_registry, tmp_path,
                                                                              monkeypatch):
    import submitit
    from submitit.core.utils import FailedJobError

    def refuse(self, command):  # no real sbatch: a refusal shows the submission got past the preflight
        raise FailedJobError("sbatch: error: stand-in for the cluster")

    monkeypatch.setattr(submitit.SlurmExecutor, "_submit_command", refuse)
    # sbatch is faked, so no SLURM tools are needed here: the backend asks only that sbatch, srun and sacct are on the
    # PATH (stand-ins that fail if called), submitit only that srun exists
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("sbatch", "srun", "sacct"):
        (tools / name).write_text("#!/bin/sh\nexit 1\n")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "snapshot.json").write_text(json.dumps({"commit": "c", "dirty": False}))
    monkeypatch.setattr("semcl.snapshot.make_snapshot", lambda root: snap)
    monkeypatch.setattr("semcl.launch.slurm.submit.prepare_synthetic_data", lambda todo, store: None)
    monkeypatch.setattr("semcl.launch.slurm.submit.max_array_size", lambda: 1001)  # scontrol waits for no controller
    res = tmp_path / "results"
    run = ("--results", str(res), "run", "test/ensemble", "--profile", "smoke", "--executor", "slurm")
    code, _, err = _cli(*run)
    advice = "semcl check test/ensemble --profile smoke"
    assert code == 2 and _one_line(err) == (f"semcl: error: refusing to submit: test/ensemble: no preflight on record "
                                            f"({res / 'preflight' / 'smoke.json'}); run `{advice}`\n")
    code, out, _ = _cli("--results", str(res), *advice.split()[1:])
    assert code == 0 and "ready" in out
    code, _, err = _cli(*run)
    assert code == 2 and "refusing to submit" not in err and "sbatch refused the array" in err


def _done_without_files(store: Store, run_id: str) -> None:
    write_json_atomic(store.metrics_path(run_id), {"run_id": run_id, "metrics": {"acc_overall": 50.0}})


def test_a_done_base_whose_file_is_gone_is_retrained_and_the_dependent_says_how(ensemble_registry, tmp_path):
    from semcl.engine.dependencies import dependencies
    from semcl.launch.backends import runs_to_submit

    store = Store(tmp_path)
    runs = plan_runs(get_table("test/ensemble"), "smoke")
    bases = [r for r in runs if not r.depends_on]
    ensembles = [r for r in runs if r.depends_on]
    for base in bases:  # finished, then its test logits were deleted to save space
        _done_without_files(store, base.run_id)
    # the engine's failure names the file and the exact way out
    with pytest.raises(ResultsError) as err:
        dependencies(ensembles[0], store, "ensemble")[0].load_logits()
    first = ensembles[0].depends_on[0]
    assert str(err.value) == (f"{store.run_dir(first) / 'test_logits.pt'}: missing, though ensemble member {first} "
                              "is done; `semcl run test/ensemble --profile smoke --retry-failed` retrains it (its "
                              "record is kept aside) and then this run")
    # `run` (select) then retrains every base the ensembles read, first, keeping each record aside
    out = io.StringIO()
    with redirect_stdout(out):
        todo = runs_to_submit(runs, store, retry_failed=False)
    assert [r.run_id for r in todo] == [r.run_id for r in bases] + [r.run_id for r in ensembles]
    for base in bases:
        folder = store.run_dir(base.run_id)
        assert store.status(base.run_id)[0] == "missing"
        (kept,) = folder.glob("metrics.replaced-*.json")
        assert json.loads(kept.read_text())["metrics"] == {"acc_overall": 50.0}  # nothing lost
        assert f"{base.run_id} {base.row_label} seed={base.seed}: done, but the file its dependent runs read is gone: " \
               f"retraining it (its record is kept as {kept})" in out.getvalue()
    # a done base that still has its file, or whose dependents are all done, is left alone
    store2 = Store(tmp_path / "other")
    for base in bases:
        _done_without_files(store2, base.run_id)
        (store2.run_dir(base.run_id) / "test_logits.pt").write_bytes(b"present")
    with redirect_stdout(io.StringIO()):
        assert [r.run_id for r in runs_to_submit(runs, store2, retry_failed=False)] == [r.run_id for r in ensembles]
    store3 = Store(tmp_path / "third")
    for run in runs:  # every run done, the bases' files gone: nothing needs them, nothing is retrained
        _done_without_files(store3, run.run_id)
    with redirect_stdout(io.StringIO()):
        assert runs_to_submit(runs, store3, retry_failed=False) == []
    assert all(store3.status(r.run_id)[0] == "done" for r in runs)


def test_the_dependency_file_table_names_what_each_kind_reads():
    from semcl.methods.spec import DEPENDENCY_FILES, DEPENDENCY_KINDS
    from semcl.store.run_folder import RunFolder

    assert set(DEPENDENCY_FILES) == set(DEPENDENCY_KINDS)
    folder = RunFolder(Path("r"))  # the table names RunFolder attributes; these are the files they resolve to
    files = {kind: getattr(folder, attr).as_posix() for kind, attr in DEPENDENCY_FILES.items()}
    assert files == {"init_from": "r/checkpoints/last.pt", "ensemble": "r/test_logits.pt",
                     "teacher": "r/checkpoints/last.pt"}


def test_an_unreadable_store_file_is_said_as_cannot_read(tmp_path, monkeypatch):
    """A store written with umask 077 by another user: the read-only commands fail on reading, not writing. Root
    reads every file, so this process is made to see the file as another user would (os.access)."""
    from semcl.cli import main as cli_main

    path = tmp_path / "metrics.json"
    path.write_text("{}")
    path.chmod(0o600)
    denied = PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr(cli_main.os, "access", lambda p, mode: os.fspath(p) != str(path))
    assert cli_main.os_error_line(denied) == (f"{path}: cannot read (Permission denied); fix the permissions of "
                                              "the results folder (--results / $SEMCL_RESULTS)")
    missing = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "new.json"))
    assert cli_main.os_error_line(missing).startswith(f"{tmp_path / 'new.json'}: cannot write (Permission denied)")


def test_a_run_folder_another_user_closed_is_said_as_cannot_read_by_status_and_table(tmp_path, monkeypatch):
    """A umask-077 store of another user: its run folder (mode 700) cannot be entered, so the files inside are
    not even visible. Root enters every folder, so this process is made to see the store as that user would:
    stat and lstat below the folder fail with EACCES, and os.access denies the folder."""
    run = plan_runs(get_table("rince/tab1"), "smoke")[0]
    store = Store(tmp_path)
    folder = store.run_dir(run.run_id)
    folder.mkdir(parents=True)
    write_json_atomic(folder / "metrics.json", {"run_id": run.run_id, "metrics": {}})
    real_stat, real_lstat, real_access = os.stat, os.lstat, os.access

    def closed(p) -> bool:
        return os.fspath(p).startswith(str(folder) + os.sep)

    def stat(p, *a, **k):
        if closed(p):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
        return real_stat(p, *a, **k)

    def lstat(p, *a, **k):
        if closed(p):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
        return real_lstat(p, *a, **k)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "access", lambda p, mode, **k: os.fspath(p) != str(folder) and real_access(p, mode, **k))
    for command in ("status", "table"):
        code, _, err = _cli("--results", str(tmp_path), command, "rince/tab1", "--profile", "smoke")
        assert code == 2, (command, err)
        line = _one_line(err)
        assert line.startswith(f"semcl: error: {folder}{os.sep}") and ": cannot read (Permission denied)" in line, line
