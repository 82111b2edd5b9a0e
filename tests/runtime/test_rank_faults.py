"""What a job does when a rank fails or the cluster hands it something unexpected: a rank's own error is reported
as that rank's and is no peer fault; only a death without a word is; fault requeues are counted per run, apart
from time-outs; a job given GPUs that sees none refuses to train; an inherited rendezvous never replaces the
job's own; `fast` needs native bf16; evaluation jobs hold one GPU."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.errors import ConfigError
from semcl.runtime import distributed, rank_errors
from semcl.store.run_folder import RunFolder


def _rank(rank: int, init: str, folder: str, rank1_raises: bool) -> None:
    """Rank 1 fails on its own (an out-of-memory error) or dies without a word; rank 0 is in a collective."""
    os.environ.update(SLURM_JOB_ID="77", SLURM_RESTART_COUNT="2")
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    run = RunFolder(__import__("pathlib").Path(folder))
    if rank == 1:
        if rank1_raises:
            err = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            rank_errors.record(run, 1, err)
        os._exit(1)  # the process ends, as it does after an uncaught error
    try:
        t = torch.ones(1)
        for _ in range(50):  # the peer is gone: a collective fails with "connection closed by peer"
            dist.all_reduce(t)
        raise AssertionError("the collective did not fail")
    except RuntimeError as err:
        assert distributed.is_peer_fault(err), err
        shown = rank_errors.explain(run, err, wait_s=1.0)
        (run.path / "rank0.json").write_text(json.dumps({"type": type(shown).__name__, "text": str(shown),
                                                         "peer_fault": distributed.is_peer_fault(shown)}))
    os._exit(0)


@pytest.mark.parametrize("rank1_raises", [True, False])
def test_a_rank_local_error_is_that_ranks_error_and_no_peer_fault(tmp_path, rank1_raises):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, f"file://{tmp_path}/init", str(tmp_path), rank1_raises))
             for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    got = json.loads((tmp_path / "rank0.json").read_text())
    if rank1_raises:
        assert got == {"type": "RankError", "peer_fault": False,
                       "text": "rank 1: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB "
                               "(a rank-local error: the job is not requeued)"}
    else:  # a peer that died without a word: still a fault, the job may requeue
        assert got["type"] != "RankError" and got["peer_fault"] is True


def test_an_error_of_an_earlier_attempt_is_not_read_as_this_ones(tmp_path, monkeypatch):
    run = RunFolder(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    rank_errors.record(run, 3, ValueError("bad JPEG"))
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # the requeued attempt
    peer = RuntimeError("Connection closed by peer")
    assert rank_errors.explain(run, peer, wait_s=0) is peer


def test_fault_requeues_are_counted_per_attempt_in_the_run_folder(tmp_path, monkeypatch):
    from semcl.launch.slurm.job import count_fault

    run = RunFolder(tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "900")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "3")  # three earlier requeues: time-outs or preemptions
    assert count_fault(run) == 1 and count_fault(run) == 1  # every surviving rank marks the same attempt
    monkeypatch.setenv("SLURM_RESTART_COUNT", "4")
    assert count_fault(run) == 2
    assert sorted(p.name for p in run.faults.iterdir()) == ["900.3", "900.4"]


@pytest.mark.parametrize("visible", ["", "-1", "GPU-00000000-unknown"])
def test_a_job_given_gpus_that_sees_none_refuses_to_train(monkeypatch, visible):
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(distributed.DeviceError) as err:
        distributed.require_given_gpus()
    assert str(err.value) == (f"this job was given GPUs (SLURM_GPUS_ON_NODE=4) but CUDA sees none "
                              f"(CUDA_VISIBLE_DEVICES={visible!r}); refusing to train on the CPU")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "0")  # a CPU job: nothing to refuse
    distributed.require_given_gpus()


def test_an_inherited_master_port_does_not_replace_the_jobs_own(monkeypatch):
    ports = []
    for job in ("5001", "5002"):
        monkeypatch.setenv("MASTER_PORT", "29500")  # exported in the submitting shell, inherited by srun
        monkeypatch.setenv("MASTER_ADDR", "login1")
        for key, value in {"SLURM_JOB_ID": job, "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0",
                           "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "gpu007",
                           "SUBMITIT_EXECUTOR": "slurm"}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(distributed.dist, "init_process_group", lambda *a, **k: None)
        distributed.init_from_slurm()
        ports.append(os.environ["MASTER_PORT"])
        assert os.environ["MASTER_ADDR"] == "gpu007"
    assert len(set(ports)) == 2 and "29500" not in ports


def test_fast_is_refused_on_a_gpu_without_native_bf16(monkeypatch):
    from semcl.run_config import build_config
    from semcl.runtime.precision import configure_backend

    cfg = build_config({"method": {"name": "ce"}, "optim": {"precision": "fast"}}, where="test")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    with pytest.raises(ConfigError) as err:
        configure_backend(cfg, torch.device("cuda", 0))
    assert str(err.value) == ("optim.precision: fast trains in bf16, which Tesla V100-SXM2-32GB does not support "
                              "natively; run with --precision official")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    configure_backend(cfg, torch.device("cuda", 0))
    torch.backends.cudnn.benchmark = False


def test_an_evaluation_job_holds_one_gpu():
    from semcl.launch.slurm.profile import parse_cluster_profile

    with pytest.raises(ConfigError, match="eval_gpus.*the evaluation runs in one process"):
        parse_cluster_profile({"eval_gpus": 2}, "mine", "mine.yaml")
