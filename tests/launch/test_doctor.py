"""semcl doctor without a cluster: the job's request from each profile, the verdicts from hand-written rank
files and the page they make, and the resume check's exactness with 4 gloo processes on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.launch.slurm.doctor import resume
from semcl.launch.slurm.doctor.page import judge, write_page
from semcl.launch.slurm.doctor.submit import doctor_parameters
from semcl.launch.slurm.profile import load_cluster_profile


def test_the_job_has_two_nodes_of_two_tasks_from_the_profile():
    assert doctor_parameters(load_cluster_profile("local")) == {
        "time": 15, "nodes": 2, "signal_delay_s": 30, "ntasks_per_node": 2, "cpus_per_task": 1, "mem": "4GB",
        "partition": "debug", "srun_args": ["--cpus-per-task=1"]}
    assert doctor_parameters(load_cluster_profile("example-a100")) == {
        "time": 15, "nodes": 2, "signal_delay_s": 120, "gpus_per_node": 2, "ntasks_per_node": 2, "cpus_per_task": 8,
        "mem": "128GB", "partition": "gpu", "account": "my-lab", "qos": "normal", "constraint": "a100",
        "srun_args": ["--cpus-per-task=8"], "additional_parameters": {"mail-type": "FAIL"}}


def test_doctor_without_slurm_on_path_is_one_line_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """A valid profile on a machine without srun/sbatch/sacct: one line naming them, not submitit's RuntimeError."""
    from semcl.cli.main import main

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code = main(["--results", str(tmp_path / "results"), "doctor", "--cluster", "local"])
    err = capsys.readouterr().err
    assert code == 2 and err == ("semcl: error: semcl doctor --cluster local: sbatch, srun, sacct not found on this "
                                 "machine's PATH; run it on a login node of the cluster\n")
    assert not (tmp_path / "results").exists()


def _rank(r: int, *, resumed_losses=(1.0, 0.5), digest="d") -> dict:
    everyone = [{"rank": i, "slurm_procid": i, "host": f"n{i}", "device": "cpu", "join_s": 0.5} for i in range(2)]
    doc = {"rendezvous": {**everyone[r], "all": everyone},
           "cpus": {"affinity": 4, "cpus_per_task": 4, "loader_workers_gpu": 3},
           "all_reduce": {"correct": True, "sizes": [{"mb": 1.0, "seconds": 0.002, "bus_gb_s": 0.5243}]},
           "ddp_steps": [{"family": "f", "table": "t/1", "row": "R", "steps": 20, "global_batch": 8, "seconds": 4.0,
                          "images_s": 40.0, "loss": 2.5, "finite": True}],
           "resume": {"reference": {"losses": [1.0, 0.5], "digest": "d"},
                      "after_requeue": {"resumed": True, "resumed_at": 1, "losses": list(resumed_losses),
                                        "digest": digest}},
           "restart_count": 1}
    if r == 0:
        doc["disk"] = {"free_gb": 50.0, "write_mb": 64, "write_mb_s": 128.0}
        doc["rank_error"] = {"collective_failed": True, "names_rank_1": True, "requeued": False,
                             "reported": "RankError: rank 1: RuntimeError: boom"}
    return doc


def test_a_good_job_passes_every_check_with_its_numbers(tmp_path):
    checks = judge([_rank(0), _rank(1)], 2, gpus=False, min_free_gb=10)
    assert [(c.name, c.ok) for c in checks] == [
        ("rendezvous and devices", True), ("CPUs and loader workers", True), ("all-reduce bandwidth", True),
        ("DDP steps: f (t/1 / R)", True), ("requeue signal and exact resume", True), ("an error on rank 1", True),
        ("results folder", True)]
    assert checks[0].detail == "2 ranks on 2 node(s) (n0, n1); devices 0:n0/cpu, 1:n1/cpu; slowest join 0.5 s"
    assert checks[2].detail == "1 MB: 2.0 ms (0.5243 GB/s bus)"
    assert checks[3].detail == "20 steps of global batch 8: 4.0 s, 40 images/s, last loss 2.5000"
    assert checks[6].detail == "50 GB free (at least 10 wanted), writes 128 MB/s (64 MB fsync'd)"
    md, js = write_page(tmp_path, {"cluster": "c", "job_id": "7", "nodes": 2, "tasks_per_node": 1,
                                   "backend": "gloo on CPUs", "seconds": 61.2}, checks)
    lines = md.read_text().splitlines()
    assert lines[2] == "job 7, 2 node(s) x 1 task(s), gloo on CPUs, 61 s; 7 of 7 checks pass"
    assert lines[7] == "| CPUs and loader workers | pass | rank 0: 4 CPUs (SLURM_CPUS_PER_TASK 4), 3 loader " \
                       "workers on a GPU, rank 1: 4 CPUs (SLURM_CPUS_PER_TASK 4), 3 loader workers on a GPU |"
    assert json.loads(js.read_text())["ok"] is True


def test_a_resume_that_differs_a_shared_gpu_and_a_small_disk_fail(tmp_path):
    ranks = [_rank(0), _rank(1, digest="other")]
    for r in ranks:
        r["rendezvous"]["all"][1].update(host="n0", device="cuda:0")
        r["rendezvous"]["all"][0].update(device="cuda:0")
    checks = {c.name: c for c in judge(ranks, 2, gpus=True, min_free_gb=100)}
    assert checks["rendezvous and devices"].detail == "two ranks share one GPU"
    assert checks["requeue signal and exact resume"].detail == "rank 1: resumed run differs from the uninterrupted one"
    assert not checks["results folder"].ok and checks["an error on rank 1"].ok


def _straight_and_resumed(rank: int, init: str, folder: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=4)
    device = torch.device("cpu")
    ref = resume.reference(device)
    net, opt, _ = resume._model(device)
    steps, resume.STEPS = resume.STEPS, 3  # stop after step 3 and checkpoint as the signal would
    losses = resume._train(net, opt, net, device, 0, [])
    resume.STEPS = steps
    every: list = [None] * 4
    dist.all_gather_object(every, losses)
    if rank == 0:
        torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": 3, "losses": every},
                   Path(folder) / "resume.pt")
    dist.barrier()
    got = resume.resumed(device, Path(folder) / "resume.pt")
    Path(out, f"{rank}.json").write_text(json.dumps({"ref": ref, "got": got}))
    dist.destroy_process_group()


def test_a_resumed_run_of_four_ranks_equals_a_straight_one_bit_for_bit(tmp_path):
    """With 3 or more ranks the order of a gradient sum depends on its layout (DDP rebuilds its buckets after
    the first step): the check averages gradients in one flat all_reduce, so the resumed run is exact."""
    # forked: the workers need no fresh import of torch and the registry (4 of them on 2 cores took 80 s)
    mp.start_processes(_straight_and_resumed, args=(f"file://{tmp_path / 'pg'}", str(tmp_path), str(tmp_path)),
                       nprocs=4, start_method="fork")
    for r in range(4):
        doc = json.loads((tmp_path / f"{r}.json").read_text())
        assert doc["got"]["resumed_at"] == 3 and len(doc["got"]["losses"]) == resume.STEPS
        assert doc["got"]["losses"] == doc["ref"]["losses"] and doc["got"]["digest"] == doc["ref"]["digest"]
