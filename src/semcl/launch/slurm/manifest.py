"""Submission manifests (results/manifests/*.json: SLURM job ids <-> run ids) and the live state
of submitted runs, read back from the results store and `sacct`, without blocking on jobs."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from semcl.errors import ResultsError
from semcl.files import write_json_atomic
from semcl.runtime.slurm_state import ACTIVE
from semcl.store import Store


def write_manifest(store: Store, meta: dict, jobs: list[dict]) -> Path:
    folder = store.folders.manifests
    path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{jobs[0]['job_id'].split('_')[0]}.json"
    write_json_atomic(path, {**meta, "jobs": jobs})
    return path


def latest_jobs(store: Store) -> dict[str, dict]:
    """run id -> its most recent job entry over all manifests. A manifest that is not one of ours
    (torn, foreign, hand-edited) is skipped with one warning naming it: the other tables' jobs stay in view."""
    out: dict[str, dict] = {}
    folder = store.folders.manifests
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            jobs = manifest_jobs(path)
        except ResultsError as err:
            if str(path) not in _WARNED:
                _WARNED.add(str(path))
                print(f"semcl: warning: {err}; skipped (the runs it submitted show without their SLURM jobs)",
                      file=sys.stderr)
            continue
        for job in jobs:
            out[job["run_id"]] = {**job, "manifest": str(path)}
    return out


_WARNED: set[str] = set()  # a manifest is warned about once per process (`wait` reads them every poll)
ENTRY_KEYS = ("job_id", "run_id", "folder")  # what status reads of each entry


def manifest_jobs(path: Path) -> list[dict]:
    """The job entries of one manifest; ResultsError (one line naming the file) if it is not a manifest."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: unreadable manifest ({type(err).__name__}: {err})") from None
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ResultsError(f"{path}: not a semcl manifest (no 'jobs' list)")
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) or not all(isinstance(job.get(k), str) for k in ENTRY_KEYS):
            raise ResultsError(f"{path}: key 'jobs[{i}]' is not a job entry (needs string {', '.join(ENTRY_KEYS)})")
    return jobs


def job_ids(entries: list[dict]) -> list[str]:
    """Every SLURM job id of these manifest entries: the training job and, where the evaluation is its
    own stage, the evaluation job."""
    return [i for e in entries for i in (e["job_id"], e.get("eval_job_id")) if i]


def current_job(store: Store, run_id: str, job: dict, states: dict[str, str]) -> tuple[dict, str]:
    """The job a run waits on now, and its label: the evaluation job once training is over (trained.json
    written, or the training job completed), else the training job (also when it failed: its log says why)."""
    if "eval_job_id" not in job:
        return job, ""
    if store.folder(run_id).trained.exists() or states.get(job["job_id"]) == "COMPLETED":
        return {**job, "job_id": job["eval_job_id"], "folder": job.get("eval_folder", job["folder"])}, "evaluation "
    return job, ""


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
    job, stage = current_job(store, run_id, job, states)
    state = states.get(job["job_id"])
    if state in ACTIVE:
        kind = ACTIVE[state]
        if kind == "pending" and status == "partial" and not stage:
            kind = "requeued"  # waiting again, with a checkpoint to resume from
        return kind, f"{stage}job {job['job_id']} {state}"
    err = Path(job["folder"]) / f"{job['job_id']}_0_log.err"
    if state is None and status != "failed":
        return status, f"{stage}job {job['job_id']}: no accounting record"
    why = detail if status == "failed" else f"{stage}job {job['job_id']} ended {state} without metrics"
    return "failed", f"{why}; log: {err}; last lines: {_tail(err)}"
