"""Send the doctor's job with the cluster profile's parameters, wait for it, and write the page."""

from __future__ import annotations

import time
from pathlib import Path

from semcl.launch.slurm.doctor.job import DoctorJob, DoctorSettings
from semcl.launch.slurm.doctor.page import Check, judge, read_ranks, write_page
from semcl.launch.slurm.doctor.steps import FAMILIES
from semcl.launch.slurm.profile import ClusterProfile, slurm_parameters
from semcl.registry.resources import Resources
from semcl.store.root import ResultsRoot

NODES, TASKS_PER_NODE = 2, 2


def doctor_parameters(cluster: ClusterProfile) -> dict:
    """2 nodes of up to 2 GPUs (one task each) from the profile; a CPU-only profile: 2 tasks of 1 CPU per node."""
    if cluster.gpus_per_node:
        per_node = min(TASKS_PER_NODE, cluster.gpus_per_node)
        params = slurm_parameters(Resources(gpus=per_node, time_min=15), cluster, f"cluster profile {cluster.name}")
        params["nodes"] = NODES
    else:
        params = slurm_parameters(Resources(cpus=1, mem_gb=2, time_min=15, tasks=NODES * TASKS_PER_NODE, nodes=NODES),
                                  cluster, f"cluster profile {cluster.name}")
    # the requeue check needs the time limit above submitit's time-out rule (under 10 min a signal reads as a time-out)
    params["time"] = max(params["time"], 15)
    return params


def settings_for(cluster: ClusterProfile) -> DoctorSettings:
    if cluster.gpus_per_node:
        return DoctorSettings(bandwidth_mb=(16.0, 64.0, 256.0), families=dict(FAMILIES), per_rank_batch=32,
                              write_mb=1024, collective_timeout_s=120)
    return DoctorSettings(families=dict(FAMILIES))


def run_doctor(cluster: ClusterProfile, results: Path, timeout_s: float, min_free_gb: float) -> list[Check]:
    import submitit

    params = doctor_parameters(cluster)
    world = params["nodes"] * params["ntasks_per_node"]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = (ResultsRoot(results).doctor / f"{cluster.name}-{stamp}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    ex = submitit.SlurmExecutor(folder=ResultsRoot(folder).submitit / "%j", max_num_timeout=1, python=cluster.python)
    ex.update_parameters(**params, setup=list(cluster.setup), job_name=f"semcl-doctor-{cluster.name}")
    start = time.time()
    job = ex.submit(DoctorJob(folder, settings_for(cluster)))
    print(f"doctor job {job.job_id} ({params['nodes']} nodes x {params['ntasks_per_node']} tasks) writes to {folder}",
          flush=True)
    failure = _wait(job, timeout_s)
    ranks, missing = read_ranks(folder, world)
    checks = [Check("job", False, failure)] if failure else []
    if missing:
        checks.append(Check("rank files", False, f"rank(s) {missing} wrote no results ({job.paths.stderr})"))
    else:
        checks += judge(ranks, world, bool(cluster.gpus_per_node), min_free_gb)
    head = {"cluster": cluster.name, "job_id": job.job_id, "nodes": params["nodes"],
            "tasks_per_node": params["ntasks_per_node"], "backend": "NCCL on GPUs" if cluster.gpus_per_node else
            "gloo on CPUs", "seconds": time.time() - start, "folder": str(folder)}
    md, js = write_page(folder, head, checks)
    print(f"page: {md} ({js.name})")
    return checks


def _wait(job, timeout_s: float) -> str | None:
    """None when the job ended well; else one line saying how it ended."""
    end = time.time() + timeout_s
    while not job.done():
        if time.time() > end:
            job.cancel()
            return f"job {job.job_id} still running after {timeout_s:.0f} s: cancelled"
        time.sleep(2)
    try:
        job.results()
    except Exception as err:  # noqa: BLE001 - the job's own error is the finding
        return f"job {job.job_id} failed: {str(err).strip().splitlines()[-1][:300] if str(err).strip() else type(err).__name__}"
    return None
