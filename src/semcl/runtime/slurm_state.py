"""SLURM job states from `sacct` / `squeue` (no dependency on the results store, so the run lock
can ask whether a job still lives)."""

from __future__ import annotations

import re
import subprocess

ACTIVE = {"PENDING": "pending", "CONFIGURING": "pending", "RUNNING": "running", "COMPLETING": "running",
          "REQUEUED": "requeued", "REQUEUE_HOLD": "requeued", "REQUEUE_FED": "requeued", "PREEMPTED": "requeued",
          "RESIZING": "running", "SUSPENDED": "pending"}


def _expand(job_id: str) -> list[str]:
    """`12_[3-5,7%2]` (a pending array) -> 12_3, 12_4, 12_5, 12_7."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job_id)
    if not m:
        return [job_id]
    ids = []
    for part in m.group(2).split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        ids += [f"{m.group(1)}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def _query(cmd: list[str]) -> dict[str, str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        jid, state = line.split("|")[:2]
        for j in _expand(jid.strip()):
            states[j] = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
    return states


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """Job states from one `sacct` call, completed by `squeue` for jobs the accounting database has not
    recorded yet (right after submission); {} where neither command is available."""
    if not job_ids:
        return {}
    arrays = ",".join(sorted({j.split("_")[0] for j in job_ids}))
    states = _query(["sacct", "-X", "-n", "--parsable2", "-o", "JobID,State", "-j", arrays])
    if any(j not in states for j in job_ids):
        queued = _query(["squeue", "-h", "-o", "%i|%T", "-j", arrays])
        states.update({j: st for j, st in queued.items() if j not in states})
    return states
