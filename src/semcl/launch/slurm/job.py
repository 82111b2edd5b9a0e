"""The SLURM job of one run (one task per GPU, on one node or several): submitit's Checkpointable,
the rank's process group, and the requeue after a peer rank died."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import submitit

from semcl.launch.slurm.profile import ClusterProfile
from semcl.registry.plan import Run
from semcl.runtime.runlock import owner, run_lock
from semcl.store import Store
from semcl.store.run_folder import RunFolder


class RunJob(submitit.helpers.Checkpointable):
    """One run as one array task (one task per GPU, on one node or several). On the requeue signal the
    train loop checkpoints at the next step boundary and submitit resubmits this same object, which
    resumes from the checkpoint. A rank whose peer died (a collective failed or timed out) requeues
    the job, at most `cluster.max_fault_requeues` times, instead of failing it."""

    def __init__(self, run: Run, store_root: Path, data_root: Path, cluster: ClusterProfile | None = None,
                 stage: str = "all"):
        self.run, self.store_root, self.data_root, self.stage = run, store_root, data_root, stage
        self.cluster = cluster or ClusterProfile(name="default")

    def __call__(self) -> str:
        import torch

        from semcl.engine.job import arithmetic_threads, execute_run
        from semcl.engine.train import CHECKPOINT_EVERY_ENV
        from semcl.runtime import distributed, interrupt

        interrupt.defer_signal()
        os.environ.setdefault(distributed.TIMEOUT_ENV, str(self.cluster.collective_timeout_s))
        os.environ.setdefault(CHECKPOINT_EVERY_ENV, str(self.cluster.checkpoint_every_min))
        store = Store(self.store_root)
        folder = store.run_dir(self.run.run_id)
        holder = owner(folder)  # every rank checks, so all of them skip together
        if holder is not None:
            print(f"{self.run.run_id}: running ({holder.describe()}); skipped", file=sys.stderr)
            return self.run.run_id
        torch.set_num_threads(arithmetic_threads(distributed.slurm_count("SLURM_CPUS_PER_TASK")))
        distributed.require_given_gpus()  # a job given GPUs that sees none never trains on the CPU
        device = distributed.init_from_slurm()  # several tasks: one process per GPU
        try:
            if store.status(self.run.run_id)[0] != "done":
                try:
                    # rank 0 owns the run (a requeued job takes over its own earlier lock)
                    with run_lock(folder) if distributed.rank() == 0 else contextlib.nullcontext():
                        execute_run(self.run, store, self.data_root, device, stage=self.stage)
                except Exception as err:
                    if distributed.is_distributed() and distributed.is_peer_fault(err):
                        requeue_after_fault(err, self.cluster.max_fault_requeues, RunFolder(folder))
                    raise
        finally:
            distributed.shutdown()
        return self.run.run_id


def count_fault(folder: RunFolder) -> int:
    """Mark this attempt as ended by a peer's death (idempotent: every surviving rank marks the same attempt)
    and return how many attempts of this run ended so. Time-outs and preemptions requeue too, but they are
    not faults and do not spend `max_fault_requeues` (SLURM_RESTART_COUNT counts them all)."""
    from semcl.runtime.rank_errors import attempt

    folder.faults.mkdir(parents=True, exist_ok=True)
    (folder.faults / attempt()).touch()
    return sum(1 for _ in folder.faults.iterdir())


def requeue_after_fault(err: BaseException, max_requeues: int, folder: RunFolder) -> None:
    """A peer rank died: requeue this job (it resumes from the last checkpoint) while at most `max_requeues`
    attempts of this run ended by a fault, then wait to be stopped by SLURM; returns when it gives up."""
    from semcl.runtime import distributed
    faults = count_fault(folder)
    job_id = submitit.JobEnvironment().job_id
    first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
    if faults > max_requeues:
        print(f"rank {distributed.rank()}: a peer rank failed ({first}); fault {faults} of this run "
              f"({folder.faults}), max_fault_requeues {max_requeues}: job {job_id} fails", file=sys.stderr, flush=True)
        return
    print(f"rank {distributed.rank()}: a peer rank failed ({first}); requeueing job {job_id} "
          f"(fault {faults} of at most {max_requeues}), it resumes from its last checkpoint",
          file=sys.stderr, flush=True)
    done = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    # a job another rank has requeued already answers that it is pending: wait for the end as well
    if done.returncode != 0 and "pending" not in done.stderr.lower():
        print(f"scontrol requeue {job_id}: {done.stderr.strip()}", file=sys.stderr, flush=True)
        return
    time.sleep(300)  # SLURM ends this step now; exiting first could record the job as failed
    os._exit(1)
