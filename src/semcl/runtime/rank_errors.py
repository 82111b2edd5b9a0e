"""A rank's own error, told apart from a peer's death.

When rank 1 raises (out of memory, a corrupt image in its slice), its process ends and rank 0's next
collective fails with "connection closed by peer", which reads like a dead node and would requeue the job
to fail the same way again. So a rank other than 0 writes its error into the run folder before it exits
(`record`), and rank 0, seeing a peer fault, looks there first (`explain`): an error of this attempt from
another rank ends the run with that rank's error, and only a peer that died without a word counts as a
fault worth a requeue. Attempts are told apart by the SLURM job id and restart count.
"""

from __future__ import annotations

import json
import os
import time

from semcl.files import write_json_atomic
from semcl.store.run_folder import RunFolder


class RankError(RuntimeError):
    """Another rank raised: its error, not a peer fault (never requeued)."""


def attempt() -> str:
    """This job attempt: the same on every rank of it, new after a requeue."""
    return f"{os.environ.get('SLURM_JOB_ID', 'no-job')}.{os.environ.get('SLURM_RESTART_COUNT', '0') or '0'}"


def record(folder: RunFolder, rank: int, err: BaseException) -> None:
    """Rank `rank` (not 0) raised `err`: leave it for rank 0, then the caller re-raises."""
    folder.rank_errors.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder.rank_error(rank), {"rank": rank, "attempt": attempt(),
                                                "error": f"{type(err).__name__}: {err}".splitlines()[0][:500]})


def explain(folder: RunFolder, err: BaseException, wait_s: float = 2.0) -> BaseException:
    """For a peer fault seen by rank 0: a RankError naming the rank(s) that raised in this attempt, else `err`.
    Waits up to `wait_s` for a file whose writer was still closing when the connection dropped."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for path in sorted(folder.rank_errors.glob("rank*.json")) if folder.rank_errors.is_dir() else []:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if doc.get("attempt") == attempt():
                found.append(f"rank {doc.get('rank')}: {doc.get('error')}")
        if found:
            return RankError("; ".join(found) + " (a rank-local error: the job is not requeued)")
        if time.monotonic() >= deadline:
            return err
        time.sleep(0.2)
