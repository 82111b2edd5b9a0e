"""The cluster path against a real SLURM cluster (slurmctld + slurmd + slurmdbd on this machine,
started by slurm/local/start-slurm.sh from .ci/run). Skipped only where SLURM is absent and CI
is not set; in CI a missing cluster is a failure."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import submitit
import torch

from semcl.engine.job import execute_run
from semcl.launch.slurm.manifest import latest_jobs, run_state
from semcl.launch.slurm.profile import load_cluster_profile
from semcl.launch.slurm.submit import submit_slurm
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime.slurm_state import sacct_states
from semcl.store import Store

SEMCL = [sys.executable, "-m", "semcl.cli"]
HAVE_SLURM = shutil.which("sbatch") is not None and subprocess.run(["sinfo"], capture_output=True).returncode == 0
if not HAVE_SLURM and os.environ.get("CI"):
    pytest.fail("CI: no SLURM cluster running (.ci/run starts it with slurm/local/start-slurm.sh)", pytrace=False)
pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not HAVE_SLURM, reason="no SLURM cluster here (sbatch/sinfo); CI runs these")]


def _run(row: str, seed: int = 123, **changes) -> Run:
    t = get_table("rince/tab2")
    base = next(r for r in plan_runs(t, "smoke") if r.row_label == row and r.seed == seed)
    cfg = copy.deepcopy(base.config)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        setattr(getattr(cfg, section), key, value)
    return Run(base.table_id, base.row_label, seed, "smoke", cfg, make_run_id(cfg, seed))


def _submit(runs: list[Run], store: Store) -> dict[str, dict]:
    res = get_table("rince/tab2").resources["smoke"]
    submit_slurm([(r, res) for r in runs], store, store.root / "data", load_cluster_profile("local"))
    return latest_jobs(store)


def _status(store: Store, *args: str) -> str:
    out = subprocess.run([*SEMCL, "--results", str(store.root), "status", "rince/tab2", "--profile", "smoke", "-v",
                          *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _state(store: Store, run: Run) -> tuple[str, str]:
    """What `semcl status` shows for a run (these runs are custom, so not in the table's plan)."""
    job = latest_jobs(store).get(run.run_id)
    return run_state(store, run.run_id, job, sacct_states([job["job_id"]] if job else []))


def _wait_for(predicate, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _wait_settled(store: Store, run_ids: list[str], timeout: float = 300):
    _wait_for(lambda: all(store.status(r)[0] in ("done", "failed") for r in run_ids)
              and not subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip(),
              timeout, "jobs to finish")


def test_smoke_row_three_seeds_as_one_array_into_the_table(tmp_path):
    store = Store(tmp_path / "results")
    res = subprocess.run([*SEMCL, "--results", str(store.root), "run", "rince/tab2", "--profile", "smoke",
                          "--executor", "slurm", "--cluster", "local", "--row", "SCL-in", "--no-check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    jobs = latest_jobs(store)
    assert len(jobs) == 3 and len({j["job_id"].split("_")[0] for j in jobs.values()}) == 1  # one array
    assert sorted(j["job_id"].split("_")[1] for j in jobs.values()) == ["0", "1", "2"]
    # `status --watch` follows the cluster's jobs (piped: plain lines) and ends by itself once none is active
    watch = subprocess.Popen([*SEMCL, "--results", str(store.root), "status", "rince/tab2", "--profile", "smoke",
                              "--watch", "--poll", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waited = subprocess.run([*SEMCL, "--results", str(store.root), "wait", "rince/tab2", "--profile", "smoke",
                             "--poll", "1", "--timeout", "300"], capture_output=True, text=True)
    assert waited.returncode == 0, waited.stderr
    watched, _ = watch.communicate(timeout=60)
    assert watch.returncode == 0
    for run in (r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "SCL-in"):
        label, epochs = f"rince/tab2  SCL-in  seed {run.seed}", run.config.schedule.epochs
        history = [json.loads(ln) for ln in store.folder(run.run_id).history.read_text().splitlines()]
        # every epoch as the run's history has it, then the run's end, in that order
        # (the evaluation stage, a job of its own, is said when a poll catches it)
        said = [ln[len(label) + 2:] for ln in watched.splitlines() if ln.startswith(label + "  ")]
        lines = [ln for ln in said if ln.startswith("epoch ")]
        assert said == [*lines, *(["evaluating"] if "evaluating" in said else []), "done"]
        assert [ln.split(" loss ")[0] for ln in lines] == [f"epoch {k}/{epochs}" for k in range(1, epochs + 1)]
        assert [float(ln.split(" loss ")[1].split()[0]) for ln in lines] == [round(h["loss"], 4) for h in history]
    csv = subprocess.run([*SEMCL, "--results", str(store.root), "table", "rince/tab2", "--profile", "smoke",
                          "--format", "csv"], capture_output=True, text=True).stdout
    scl = [ln for ln in csv.splitlines() if ln.startswith("SCL-in,top1,")]
    assert scl and scl[0].split(",")[7] == "3"  # n = 3
    # the runs executed the snapshot of the code taken at submission
    rec = json.loads(store.metrics_path(next(iter(jobs))).read_text())
    assert rec["git"]["snapshot"] == json.loads(next((store.root / "manifests").glob("*.json")).read_text())["snapshot"]
    # a second submission submits nothing
    again = subprocess.run([*SEMCL, "--results", str(store.root), "run", "rince/tab2", "--profile", "smoke",
                            "--executor", "slurm", "--cluster", "local", "--row", "SCL-in", "--no-check"],
                         capture_output=True, text=True)
    assert again.returncode == 0
    assert again.stdout.startswith("0 runs to submit (3 already done, failed or running elsewhere, 0 queued")


def test_requeue_and_preemption_resume_to_identical_metrics(tmp_path):
    runs = [_run("RINCE-in", schedule__epochs=6), _run("Cross-entropy", schedule__epochs=10)]
    torch.set_num_threads(1)  # the jobs run with one CPU each: same reduction order, same bits
    reference = {r.run_id: execute_run(r, Store(tmp_path / "ref"), tmp_path)["metrics"] for r in runs}
    store = Store(tmp_path / "results")
    jobs = _submit(runs, store)
    ckpt = {r.run_id: store.run_dir(r.run_id) / "checkpoints" / "last.pt" for r in runs}
    rince, ce = (jobs[r.run_id]["job_id"] for r in runs)
    # each job is signalled the moment its own first checkpoint lands, so that it is still training: waiting for
    # both let the 10-epoch run finish training first on a fast host (CI), and its signal then came during the
    # evaluations, which requeue without a mid-epoch checkpoint
    _wait_for(ckpt[runs[1].run_id].exists, 120, "the first checkpoint of Cross-entropy")
    t_requeue = time.time()
    folder = Path(jobs[runs[1].run_id]["folder"]).parent / "%j"
    submitit.SlurmJob(folder=folder, job_id=ce)._interrupt()  # preemption signal: checkpoint mid-epoch, requeue
    _wait_for(ckpt[runs[0].run_id].exists, 120, "the first checkpoint of RINCE-in")
    subprocess.run(["scontrol", "requeue", rince], check=True)  # hard requeue: resumes from the epoch checkpoint
    _wait_for(lambda: any(_state(store, r)[0] == "requeued" for r in runs), 30, "a requeued state")
    _wait_settled(store, list(ckpt), timeout=400)
    for r in runs:
        record = store.read_record(r.run_id)
        assert record is not None and record["metrics"] == reference[r.run_id], r.row_label
        log = (store.run_dir(r.run_id) / "log.txt").read_text()
        assert "resumed from" in log
    ce_log = (store.run_dir(runs[1].run_id) / "log.txt").read_text()
    assert "requeue signal: checkpoint at epoch" in ce_log
    logs = "".join((Path(jobs[runs[1].run_id]["folder"]) / f"{ce}_0_log.{ext}").read_text() for ext in ("out", "err"))
    # with a time limit of 10 min or less submitit calls every USR2 a time-out (it still requeues)
    assert "Caught signal SIGUSR2" in logs and "Requeued job" in logs
    print(f"requeue-to-finish {time.time() - t_requeue:.1f}s")


def test_failing_run_is_reported_with_its_log_while_others_complete(tmp_path):
    good = _run("Cross-entropy")
    bad = _run("RINCE-in", method__taus=[0.1, 0.2, 0.3])  # three temperatures for two ranks: fails at build
    store = Store(tmp_path / "results")
    jobs = _submit([good, bad], store)
    _wait_settled(store, [good.run_id, bad.run_id])
    assert store.status(good.run_id)[0] == "done"
    status, detail = _state(store, bad)
    assert status == "failed" and "3 temperatures for 2 ranks" in detail
    assert f"log: {jobs[bad.run_id]['folder']}/{jobs[bad.run_id]['job_id']}_0_log.err" in detail


def test_cancelled_job_shows_failed_not_running(tmp_path):
    run = _run("SCL-out", schedule__epochs=500)
    store = Store(tmp_path / "results")
    job_id = _submit([run], store)[run.run_id]["job_id"]
    _wait_for(lambda: _state(store, run)[0] == "running", 60, "the job to run")
    subprocess.run(["scancel", job_id], check=True)
    status, detail = _wait_for(lambda: (s := _state(store, run))[0] == "failed" and s, 60, "failed state")
    assert f"job {job_id} ended CANCELLED without metrics" in detail


def test_arrays_larger_than_max_array_size_are_chunked(tmp_path, monkeypatch):
    import semcl.launch.slurm.submit

    monkeypatch.setattr(semcl.launch.slurm.submit, "max_array_size", lambda: 3)  # task ids 0..1 per array
    runs = [_run("Cross-entropy", seed=s, schedule__epochs=1) for s in (123, 546, 937)]
    store = Store(tmp_path / "results")
    jobs = _submit(runs, store)
    arrays = sorted({j["job_id"].split("_")[0] for j in jobs.values()}, key=int)
    # a chunk of one run goes out as a plain job (submitit submits no array of size one)
    tasks = sorted(j["job_id"].split("_")[1] if "_" in j["job_id"] else "-" for j in jobs.values())
    assert len(arrays) == 2 and tasks == ["-", "0", "1"]
    _wait_settled(store, [r.run_id for r in runs])
    assert all(store.status(r.run_id)[0] == "done" for r in runs)


def test_ensemble_rows_wait_for_their_members_with_afterok(ensemble_registry, tmp_path):
    store = Store(tmp_path / "results")
    res = subprocess.run([*SEMCL, "--results", str(store.root), "run", "test/ensemble", "--profile", "smoke",
                          "--executor", "slurm", "--cluster", "local", "--no-check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    entries = latest_jobs(store)
    runs = plan_runs(get_table("test/ensemble"), "smoke")
    members = [r for r in runs if not r.depends_on]
    ensembles = [r for r in runs if r.depends_on]
    member_arrays = {entries[r.run_id]["job_id"] for r in members}
    for ens in ensembles:  # the second array waits on exactly the member tasks it reads
        assert set(entries[ens.run_id]["after"]) <= member_arrays
        assert {entries[d]["job_id"] for d in ens.depends_on} <= set(entries[ens.run_id]["after"])
    _wait_settled(store, [r.run_id for r in runs])
    assert all(store.status(r.run_id)[0] == "done" for r in runs)
    ids = {entries[r.run_id]["job_id"] for r in runs}

    def spans() -> dict | None:  # accounting records jobs a moment after they end
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,Start,End", "-j", ",".join(sorted(ids))],
                             capture_output=True, text=True).stdout
        got = {ln.split("|")[0]: ln.split("|")[1:] for ln in out.splitlines() if ln}
        return got if ids <= set(got) and all(v[1] not in ("", "Unknown") for v in got.values()) else None

    span = _wait_for(spans, 60, "sacct to record every job")
    last_member_end = max(span[entries[r.run_id]["job_id"]][1] for r in members)
    assert all(span[entries[r.run_id]["job_id"]][0] >= last_member_end for r in ensembles)


def _reference_rank(rank: int, init: str, run: Run, root: str) -> None:
    """One rank of the by-hand data-parallel reference (what the SLURM job's two tasks must reproduce)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    execute_run(run, Store(Path(root)), Path(root) / "data", torch.device("cpu"))
    dist.destroy_process_group()


def test_two_task_job_trains_data_parallel_like_two_processes_by_hand(tmp_path):
    """resources.tasks 2 on the CPU cluster: one SLURM job, two tasks, one gloo process group (the multi-GPU
    path); its metrics equal two processes started by hand with the same config, bit for bit."""
    import torch.multiprocessing as mp

    from semcl.launch.backends import prepare_synthetic_data
    from semcl.launch.slurm.profile import slurm_parameters
    from semcl.registry.resources import Resources

    run = _run("RINCE-in", schedule__epochs=2)
    res = Resources(cpus=1, mem_gb=2, time_min=10, tasks=2)
    params = slurm_parameters(res, load_cluster_profile("local"), "test")
    assert (params["ntasks_per_node"], params["cpus_per_task"], params["mem"]) == (2, 1, "4GB")

    ref = Store(tmp_path / "ref")
    prepare_synthetic_data([run], ref)
    mp.spawn(_reference_rank, args=(f"file://{tmp_path / 'pg'}", run, str(ref.root)), nprocs=2)
    want = json.loads(ref.metrics_path(run.run_id).read_text())
    assert want["world_size"] == 2

    store = Store(tmp_path / "results")
    submit_slurm([(run, res)], store, store.root / "data", load_cluster_profile("local"))
    _wait_settled(store, [run.run_id])
    got = json.loads(store.metrics_path(run.run_id).read_text())
    assert got["world_size"] == 2 and got["threads"] == 1
    assert got["metrics"] == want["metrics"]
    assert [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]
    # the evaluation ran as its own one-task job, started once training had ended (aftercorr / afterok)
    entry = latest_jobs(store)[run.run_id]
    assert "evaluated_on" in got and entry["eval_job_id"] != entry["job_id"]

    def spans() -> dict | None:
        ids = [entry["job_id"], entry["eval_job_id"]]
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,Start,End,NTasks,AllocCPUS", "-j", ",".join(ids)],
                             capture_output=True, text=True).stdout
        got = {ln.split("|")[0]: ln.split("|")[1:] for ln in out.splitlines() if ln}
        return got if set(ids) <= set(got) and all(v[1] not in ("", "Unknown") for v in got.values()) else None

    span = _wait_for(spans, 60, "sacct to record both jobs")
    assert span[entry["eval_job_id"]][0] >= span[entry["job_id"]][1]
    assert span[entry["job_id"]][3] == "2" and span[entry["eval_job_id"]][3] == "1"
    status = _state(store, run)
    assert status[0] == "done"
