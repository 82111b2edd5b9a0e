"""A cluster profile's `python:` command on the real SLURM cluster: a wrapper script (standing in for `apptainer exec
--nv semcl.sif python`) logs each start, then execs this venv's Python. A two-task run trains as one job, is
requeued (`scontrol requeue`) after its first checkpoint and resumes, and evaluates in a job of its own: the
training, its requeue and the evaluation all started through the wrapper."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.launch.slurm.job_python import check_job_python
from semcl.launch.slurm.manifest import latest_jobs
from semcl.launch.slurm.profile import load_cluster_profile
from semcl.launch.slurm.submit import submit_slurm
from semcl.registry.resources import Resources
from semcl.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from test_slurm_cluster import HAVE_SLURM, _run, _wait_for, _wait_settled  # noqa: E402

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not HAVE_SLURM, reason="no SLURM cluster here (sbatch/sinfo); CI runs these")]

ROOT = Path(__file__).resolve().parents[3]


def test_training_requeue_and_evaluation_run_through_the_profiles_python(tmp_path, monkeypatch):
    log = tmp_path / "python-starts.log"
    wrap = tmp_path / "wrap-python"
    # one line per start: job, array task, restart count, the arguments (submitit's _submit and its folder)
    wrap.write_text("#!/bin/bash\n"
                    f'echo "job=${{SLURM_JOB_ID:-}} array=${{SLURM_ARRAY_JOB_ID:-}}_${{SLURM_ARRAY_TASK_ID:-}} '
                    f'restart=${{SLURM_RESTART_COUNT:-0}} task=${{SLURM_PROCID:-}} args=$*" >> {log}\n'
                    f'exec {sys.executable} "$@"\n')
    wrap.chmod(0o755)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    shutil.copy(ROOT / "slurm" / "profiles" / "local.yaml", profiles / "wrapped.yaml")
    with (profiles / "wrapped.yaml").open("a") as f:
        f.write(f"python: {wrap}\n")
    monkeypatch.setenv("SEMCL_CLUSTER_PROFILES", str(profiles))
    cluster = load_cluster_profile("wrapped")
    assert cluster.python == str(wrap)
    # the check `semcl run --executor slurm` / doctor / check make before submitting: semcl and scontrol inside
    report = check_job_python(cluster.python, "wrapped.yaml", env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert report["semcl"] and report["scontrol"] == shutil.which("scontrol")
    log.unlink()  # the check's own start is not a job's

    run = _run("RINCE-in", schedule__epochs=4)
    store = Store(tmp_path / "results")
    # two CPU tasks: training is one job of two ranks, the evaluation a one-task job after it
    submit_slurm([(run, Resources(cpus=1, mem_gb=2, time_min=15, tasks=2))], store, store.root / "data", cluster)
    entry = latest_jobs(store)[run.run_id]
    train_job, eval_job = entry["job_id"], entry["eval_job_id"]
    ckpt = store.run_dir(run.run_id) / "checkpoints" / "last.pt"
    _wait_for(ckpt.exists, 300, "the first checkpoint")
    subprocess.run(["scontrol", "requeue", train_job], check=True)
    _wait_settled(store, [run.run_id], timeout=600)
    record = store.read_record(run.run_id)
    assert record is not None and record["world_size"] == 2
    assert "resumed from" in (store.run_dir(run.run_id) / "log.txt").read_text()

    starts = [dict(kv.split("=", 1) for kv in ln.split(" ", 4)) for ln in log.read_text().splitlines()]
    assert all("-u -m submitit.core._submit" in s["args"] for s in starts)
    train_id = train_job.split("_")[0]
    train = {(s["restart"], s["task"]) for s in starts if s["array"].split("_")[0] == train_id or s["job"] == train_id}
    assert {("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")} <= train  # both ranks, before and after the requeue
    eval_id = eval_job.split("_")[0]
    evals = [s for s in starts if s["array"].split("_")[0] == eval_id or s["job"] == eval_id]
    assert [(s["restart"], s["task"]) for s in evals] == [("0", "0")]
