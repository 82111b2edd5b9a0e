"""An error on rank 1, as rank 0 sees it: its next collective with rank 1 fails like a dead peer's, and the
engine's rule (semcl.runtime.rank_errors) must report rank 1's own error instead, which is not requeued."""

from __future__ import annotations

import datetime
from pathlib import Path

import torch
import torch.distributed as dist

from semcl.runtime import distributed, rank_errors
from semcl.store.run_folder import RunFolder

MESSAGE = "doctor: a deliberate error on rank 1"


def rank_one_error(folder: Path, timeout_s: float = 10.0) -> dict | None:
    """Rank 1 raises and records its error, then stays out of the collective; rank 0's all_reduce with it
    fails (a time-out on gloo), and rank 0 explains the fault. A gloo group of ranks 0 and 1 of its own, so
    the job's main group (NCCL on GPUs) stays usable. Returns rank 0's verdict, None on the other ranks."""
    group = dist.new_group(ranks=[0, 1], backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    run_folder = RunFolder(folder)
    me = distributed.rank()
    verdict = None
    if me == 1:
        try:
            raise RuntimeError(MESSAGE)
        except RuntimeError as err:  # what the engine's job does with a rank's own error (semcl.engine.job)
            rank_errors.record(run_folder, me, err)
    elif me == 0:
        try:
            dist.all_reduce(torch.zeros(1), group=group)
            verdict = {"collective_failed": False}
        except Exception as err:  # noqa: BLE001 - the fault is what this check looks at
            shown = rank_errors.explain(run_folder, err)
            verdict = {"collective_failed": True, "peer_fault": distributed.is_peer_fault(err),
                       "reported": f"{type(shown).__name__}: {shown}"[:300],
                       "names_rank_1": isinstance(shown, rank_errors.RankError) and "rank 1:" in str(shown),
                       # the job requeues on a peer fault only: rank 1's own error must not read as one
                       "requeued": distributed.is_peer_fault(shown)}
    distributed.barrier()
    return verdict
