"""Submission manifests (results/manifests/*.json: SLURM job ids <-> run ids) and the live state
of submitted runs, read back from the results store and `sacct`, without blocking on jobs."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from semcl.runs import Store, write_json_atomic

ACTIVE = {"PENDING": "pending", "CONFIGURING": "pending", "RUNNING": "running", "COMPLETING": "running",
          "REQUEUED": "requeued", "REQUEUE_HOLD": "requeued", "REQUEUE_FED": "requeued", "PREEMPTED": "requeued",
          "RESIZING": "running", "SUSPENDED": "pending"}


def write_manifest(store: Store, meta: dict, jobs: list[dict]) -> Path:
    folder = store.root / "manifests"
    path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{jobs[0]['job_id'].split('_')[0]}.json"
    write_json_atomic(path, {**meta, "jobs": jobs})
    return path


def latest_jobs(store: Store) -> dict[str, dict]:
    """run id -> its most recent job entry over all manifests."""
    out: dict[str, dict] = {}
    folder = store.root / "manifests"
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        for job in json.loads(path.read_text())["jobs"]:
            out[job["run_id"]] = {**job, "manifest": str(path)}
    return out


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


def _tail(path: Path, n: int = 3) -> str:
    if not path.exists():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def run_state(store: Store, run_id: str, job: dict | None, states: dict[str, str]) -> tuple[str, str]:
    """done / pending / running / requeued / failed / missing (/ partial), with a detail."""
    status, detail = store.status(run_id)
    if status == "done" or job is None:
        return status, detail
    state = states.get(job["job_id"])
    if state in ACTIVE:
        kind = ACTIVE[state]
        if kind == "pending" and status == "partial":
            kind = "requeued"  # waiting again, with a checkpoint to resume from
        return kind, f"job {job['job_id']} {state}"
    err = Path(job["folder"]) / f"{job['job_id']}_0_log.err"
    if state is None and status != "failed":
        return status, f"job {job['job_id']}: no accounting record"
    why = detail if status == "failed" else f"job {job['job_id']} ended {state} without metrics"
    return "failed", f"{why}; log: {err}; last lines: {_tail(err)}"
