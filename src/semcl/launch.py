"""Submit runs through submitit: `local` (subprocesses on this machine) and `debug` (in-process).

Only runs that are missing or partial go out (failed ones with --retry-failed); a done run is
never resubmitted and an unreadable metrics.json stops the submission before anything starts.
On the local executor the runs are split into `workers` jobs that each work through their
share in turn, which bounds concurrency and pays torch's import once per worker.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import submitit

from semcl.errors import ResultsError
from semcl.runs import Run, Store, estimate_cost


class RunBatch:
    """The job: execute several runs in turn; one run's failure does not stop the others."""

    def __init__(self, runs: list[Run], store_root: Path, data_root: Path, threads: int):
        self.runs, self.store_root, self.data_root, self.threads = runs, store_root, data_root, threads

    def __call__(self) -> dict[str, str]:
        import torch

        from semcl.engine.job import execute_run

        torch.set_num_threads(self.threads)
        store = Store(self.store_root)
        outcome = {}
        for run in self.runs:
            if store.status(run.run_id)[0] == "done":
                outcome[run.run_id] = "done"
                continue
            try:
                execute_run(run, store, self.data_root)
                outcome[run.run_id] = "done"
            except Exception as err:  # recorded in failed.json by execute_run
                outcome[run.run_id] = f"failed: {type(err).__name__}: {err}"
        return outcome


def check_data_root(runs: list[Run], data_root: Path) -> None:
    """Fail before submitting anything if a dataset a run needs is not under the data root."""
    from semcl.data.layout import DATASET_DIRS, check_root, require

    needed = sorted({n for r in runs if not r.config.data.synthetic for n in (r.config.data.name, *r.config.eval.ood)})
    for name in needed:
        check_root(data_root, name)
        require(data_root, DATASET_DIRS[name], name)


def select(runs: list[Run], store: Store, retry_failed: bool) -> list[Run]:
    unique = list({r.run_id: r for r in runs}.values())  # two tables may share a run
    todo = []
    for run in unique:
        if store.metrics_path(run.run_id).exists():
            store.read_record(run.run_id)  # raises ResultsError (one line) if unreadable
            continue
        status, _ = store.status(run.run_id)
        if status in ("missing", "partial") or (status == "failed" and retry_failed):
            todo.append(run)
    return todo


def _split(runs: list[Run], workers: int) -> list[list[Run]]:
    """Longest-first greedy assignment by estimated cost, so workers finish together."""
    def minutes(r: Run) -> float:
        return float(estimate_cost(r.config, "mini").split()[0])

    shares: list[list[Run]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for run in sorted(runs, key=minutes, reverse=True):
        i = load.index(min(load))
        shares[i].append(run)
        load[i] += max(minutes(run), 1e-6)  # zero-cost estimates still spread out
    return [s for s in shares if s]


def submit_runs(runs: list[Run], store: Store, data_root: Path, *, executor: str = "local",
                workers: int | None = None, retry_failed: bool = False) -> int:
    todo = select(runs, store, retry_failed)
    skipped = len({r.run_id for r in runs}) - len(todo)
    print(f"{len(todo)} runs to submit ({skipped} already done or failed; --retry-failed resubmits failed ones)")
    if not todo:
        return 0
    synthetic = [r for r in todo if r.config.data.synthetic]
    if synthetic:  # write the shared synthetic data once, before any worker reads it
        from semcl.engine.job import prepare_synthetic

        for run in {(r.config.data.name, tuple(r.config.eval.ood)): r for r in synthetic}.values():
            prepare_synthetic(run, store)
    cpus = os.cpu_count() or 1
    workers = max(1, min(workers or min(cpus, 4), len(todo)))
    threads = max(1, cpus // workers)
    shares = _split(todo, workers) if executor == "local" else [todo]
    ex = submitit.AutoExecutor(folder=store.root / "submitit" / "%j", cluster=executor)
    ex.update_parameters(timeout_min=24 * 60)
    jobs = [ex.submit(RunBatch(share, store.root, data_root, threads)) for share in shares]
    print(f"submitted {len(todo)} runs as {len(jobs)} {executor} job(s), {threads} thread(s) each")
    return wait(jobs, todo, store, in_process=executor == "debug")


def wait(jobs: list, runs: list[Run], store: Store, *, in_process: bool = False) -> int:
    """Block until the jobs end, showing progress; returns the number of failed runs."""
    from tqdm import tqdm

    ids = [r.run_id for r in runs]
    with tqdm(total=len(ids), unit="run", file=sys.stderr, disable=in_process) as bar:
        while not in_process:
            finished = all(j.done() for j in jobs)  # debug jobs run inside done()/result()
            states = [store.status(i)[0] for i in ids]
            settled = sum(s in ("done", "failed") for s in states)
            bar.update(settled - bar.n)
            if finished:
                break
            time.sleep(1.0)
    failed = 0
    for job in jobs:
        try:
            job.result()
        except Exception as err:  # the worker process itself died
            print(f"job {job.job_id} failed: {str(err).splitlines()[-1] if str(err) else err}", file=sys.stderr)
    for run in runs:
        status, detail = store.status(run.run_id)
        if status != "done":
            failed += 1
            print(f"{run.run_id} {run.row_label} seed={run.seed}: {status} {detail}", file=sys.stderr)
    print(f"{len(runs) - failed} of {len(runs)} runs done")
    if failed:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed
