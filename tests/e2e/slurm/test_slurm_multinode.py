"""The multi-node path against a real two-node SLURM cluster on this machine (two slurmd, each its own
NodeName and port: `SLURM_NODES=2 slurm/local/start-slurm.sh`, as .ci/run starts it): a job of
2 nodes x 2 tasks trains like 4 processes started by hand on one node, bit for bit; a rank killed
mid-run ends the job within the collective timeout, the job requeues itself and the resumed run
ends with the metrics of an uninterrupted one."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from test_slurm_cluster import HAVE_SLURM, _run, _wait_for, _wait_settled  # same folder (rootdir import)

from semcl.engine.job import execute_run
from semcl.launch.backends import prepare_synthetic_data
from semcl.launch.slurm.manifest import latest_jobs
from semcl.launch.slurm.profile import load_cluster_profile, slurm_parameters
from semcl.launch.slurm.submit import submit_slurm
from semcl.registry.plan import Run
from semcl.registry.resources import Resources
from semcl.store import Store

NODES = sorted(subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()) \
    if HAVE_SLURM else []
if HAVE_SLURM and len(NODES) < 2 and os.environ.get("CI"):
    pytest.fail("CI: the local cluster has one node (.ci/run starts two: SLURM_NODES=2)", pytrace=False)
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(len(NODES) < 2, reason="needs the two-node local cluster")]


def _by_hand(rank: int, init: str, run: Run, root: str, world: int) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    execute_run(run, Store(Path(root)), Path(root) / "data", torch.device("cpu"))
    dist.destroy_process_group()


def _reference(tmp_path: Path, run: Run, world: int) -> dict:
    ref = Store(tmp_path / f"ref{world}")
    prepare_synthetic_data([run], ref)
    mp.spawn(_by_hand, args=(f"file://{tmp_path / f'pg{world}'}", run, str(ref.root), world), nprocs=world)
    return json.loads(ref.metrics_path(run.run_id).read_text())


def _nodes_of(job_id: str) -> str:
    def done():
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State,NodeList", "-j", job_id],
                             capture_output=True, text=True).stdout.split()
        return out[-1] if out and out[-1].startswith("COMPLETED") else None
    return _wait_for(done, 60, "sacct to record the job").split("|")[1]


def test_two_nodes_by_two_tasks_equal_four_processes_on_one_node(tmp_path):
    run = _run("RINCE-in", schedule__epochs=2)
    res = Resources(cpus=1, mem_gb=2, time_min=15, tasks=4, nodes=2)
    params = slurm_parameters(res, load_cluster_profile("local"), "test")
    assert (params["nodes"], params["ntasks_per_node"], params["mem"]) == (2, 2, "4GB")
    want = _reference(tmp_path, run, 4)
    store = Store(tmp_path / "results")
    submit_slurm([(run, res)], store, store.root / "data", load_cluster_profile("local"))
    _wait_settled(store, [run.run_id], timeout=600)
    got = json.loads(store.metrics_path(run.run_id).read_text())
    assert got["world_size"] == 4 and got["threads"] == 1
    assert got["metrics"] == want["metrics"]
    assert [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]
    job = latest_jobs(store)[run.run_id]["job_id"]
    assert _nodes_of(job) == ",".join(NODES)  # one task pair on each node


def _rank_pid(procid: int) -> int | None:
    """The process of SLURM rank `procid` of the (one) running submitit job step."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"submitit.core._submit" in cmd and f"SLURM_PROCID={procid}".encode() in env \
                and any(e.startswith(b"SLURM_STEP_ID=") for e in env):
            return int(pid)
    return None


def test_a_killed_rank_requeues_the_job_and_the_resume_matches(tmp_path):
    """Rank 1 (on the second node) is killed with SIGKILL after the first checkpoint: rank 0's next
    collective fails, it requeues the job (one line in the log), the job restarts on both nodes and
    resumes from the checkpoint; the metrics equal an uninterrupted 2-process run's."""
    run = _run("RINCE-in", schedule__epochs=5)
    res = Resources(cpus=1, mem_gb=2, time_min=15, tasks=2, nodes=2)
    want = _reference(tmp_path, run, 2)
    cluster = dataclasses.replace(load_cluster_profile("local"), collective_timeout_s=20)
    store = Store(tmp_path / "results")
    submit_slurm([(run, res)], store, store.root / "data", cluster)
    entry = latest_jobs(store)[run.run_id]
    ckpt = store.run_dir(run.run_id) / "checkpoints" / "last.pt"
    _wait_for(ckpt.exists, 300, "the first checkpoint")
    victim = _wait_for(lambda: _rank_pid(1), 30, "rank 1's process")
    killed_at = time.time()
    os.kill(victim, signal.SIGKILL)
    out = Path(entry["folder"]) / f"{entry['job_id']}_0_log.err"
    _wait_for(lambda: out.exists() and "requeueing job" in out.read_text(), 60, "the requeue line")
    assert time.time() - killed_at < cluster.collective_timeout_s + 15  # within the timeout, never a hang
    _wait_settled(store, [run.run_id], timeout=600)
    got = json.loads(store.metrics_path(run.run_id).read_text())
    assert got["metrics"] == want["metrics"]
    assert [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]
    assert "resumed from" in (store.run_dir(run.run_id) / "log.txt").read_text()
    assert "a peer rank failed" in out.read_text() and "fault 1 of at most 2" in out.read_text()


# what one task of the job sees: its CPU binding, SLURM's CPU count and the loader workers it would start on a GPU
# (loader_workers reads both; the device only decides 0 on the CPU, nothing touches CUDA)
TASK_CPUS = """
import json, os, torch
from semcl.data.views.file_views import loader_workers
print(json.dumps({"rank": int(os.environ["SLURM_PROCID"]), "affinity": len(os.sched_getaffinity(0)),
                  "cpus_per_task": os.environ.get("SLURM_CPUS_PER_TASK"), "workers": loader_workers(torch.device("cuda"))}))
"""


def test_under_cpu_binding_each_task_of_a_two_task_job_gets_its_cpus_and_loader_workers(tmp_path):
    """The local cluster binds tasks to CPUs (TaskPlugin=task/affinity, slurm/local/start-slurm.sh): the job's
    srun line asks for --cpus-per-task again (Slurm >= 22.05 does not pass sbatch's on), so every rank is bound
    to its 2 CPUs and would start one loader worker instead of decoding in the training process."""
    import submitit

    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    assert "task/affinity" in conf, "the local cluster runs without CPU binding"
    cluster = load_cluster_profile("local")
    params = slurm_parameters(Resources(cpus=2, mem_gb=1, time_min=5, tasks=2, nodes=2), cluster, "test")
    assert params["srun_args"] == ["--cpus-per-task=2"]
    ex = submitit.AutoExecutor(folder=tmp_path / "%j", cluster="slurm")
    ex.update_parameters(**{f"slurm_{k}": v for k, v in params.items() if k != "signal_delay_s"})
    job = ex.submit(submitit.helpers.CommandFunction([sys.executable, "-c", TASK_CPUS]))
    got = sorted((json.loads(out) for out in job.results()), key=lambda r: r["rank"])
    assert got == [{"rank": r, "affinity": 2, "cpus_per_task": "2", "workers": 1} for r in (0, 1)]


def test_two_jobs_from_a_shell_exporting_master_port_run_at_once_on_their_own_rendezvous(tmp_path, monkeypatch):
    """A submitting shell that exported MASTER_ADDR/MASTER_PORT (a login node's leftovers; sbatch passes the
    environment on) must not make two two-task jobs share one rendezvous or look for an unknown host: both run
    side by side on the cluster and each trains as its own 2-rank group."""
    monkeypatch.setenv("MASTER_ADDR", "login1")  # resolves nowhere here
    monkeypatch.setenv("MASTER_PORT", "29500")
    runs = [_run("RINCE-in", seed=seed, schedule__epochs=2) for seed in (123, 546)]
    res = Resources(cpus=1, mem_gb=1, time_min=10, tasks=2)
    store = Store(tmp_path / "results")
    submit_slurm([(r, res) for r in runs], store, store.root / "data", load_cluster_profile("local"))
    _wait_settled(store, [r.run_id for r in runs])
    records = [json.loads(store.metrics_path(r.run_id).read_text()) for r in runs]
    assert [(rec["world_size"], rec["seed"]) for rec in records] == [(2, 123), (2, 546)]
    jobs = [latest_jobs(store)[r.run_id]["job_id"] for r in runs]

    def spans():
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,Start,End", "-j", ",".join(jobs)],
                             capture_output=True, text=True).stdout
        got = {ln.split("|")[0]: ln.split("|")[1:] for ln in out.splitlines() if ln}
        return got if set(jobs) <= set(got) and all(v[1] not in ("", "Unknown") for v in got.values()) else None

    (start_a, end_a), (start_b, end_b) = (_wait_for(spans, 60, "sacct to record both jobs")[j] for j in jobs)
    assert start_a < end_b and start_b < end_a  # the two rendezvous were up at the same time
