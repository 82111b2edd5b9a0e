"""The local and debug backends: runs executed on this machine through submitit (`local`: subprocess
workers; `debug`: in-process, inside `job.result()`).

On the local executor the runs are split into `workers` jobs that each work through their share in
turn, which bounds concurrency and pays torch's import once per worker. Which runs go out, and in
which stages, is semcl.launch.backends's (the same for every backend).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import submitit

from semcl.errors import ResultsError, SemclError
from semcl.estimate.cost import estimated_minutes
from semcl.files import low_space_note
from semcl.launch.backends import prepare_synthetic_data, runs_to_submit
from semcl.launch.base import Backend, LaunchOptions
from semcl.registry.plan import Run, waves
from semcl.runtime.runlock import RunOwned, run_lock
from semcl.store import Store


class RunBatch:
    """The job: execute several runs in turn; one run's failure does not stop the others.

    Each run is trained under its lock (semcl.runtime.runlock): a run that another live process owns is
    skipped. SIGTERM / SIGINT stop the batch: the current run checkpoints at the next step
    boundary, the rest do not start, and the outcome says so."""

    def __init__(self, runs: list[Run], store_root: Path, data_root: Path, threads: int):
        self.runs, self.store_root, self.data_root, self.threads = runs, store_root, data_root, threads

    def __call__(self) -> dict[str, str]:
        import torch

        from semcl.engine.job import arithmetic_threads, execute_run
        from semcl.runtime import interrupt

        torch.set_num_threads(arithmetic_threads(self.threads))
        store = Store(self.store_root)
        outcome: dict[str, str] = {}
        with interrupt.stop_on_signals():
            for i, run in enumerate(self.runs):
                try:
                    if store.status(run.run_id)[0] == "done":
                        outcome[run.run_id] = "done"
                        continue
                    with run_lock(store.run_dir(run.run_id)):
                        execute_run(run, store, self.data_root)
                    outcome[run.run_id] = "done"
                except RunOwned as err:
                    outcome[run.run_id] = f"skipped: {err}"
                except interrupt.Interrupted as sig:
                    outcome[run.run_id] = f"{INTERRUPTED} by {sig}, {checkpoint_position(store, run.run_id)}"
                    outcome.update({r.run_id: NOT_STARTED for r in self.runs[i + 1:]})
                    break
                except Exception as err:  # recorded in failed.json by execute_run
                    outcome[run.run_id] = f"failed: {type(err).__name__}: {err}"
        return outcome


INTERRUPTED = "interrupted"
NOT_STARTED = "not started (interrupted)"


def checkpoint_position(store: Store, run_id: str) -> str:
    """Where a rerun resumes: "checkpoint at epoch E step S" (worker side: torch is loaded)."""
    from semcl.runtime.checkpoint import load

    try:
        state = load(store.folder(run_id).checkpoint)
    except ResultsError as err:
        return str(err)
    if state is None:
        return "no checkpoint yet (a rerun starts it afresh)"
    return f"checkpoint at epoch {state['epoch']} step {state.get('step', 0)}"


def _split(runs: list[Run], workers: int) -> list[list[Run]]:
    """Longest-first greedy assignment by estimated cost, so workers finish together."""
    def minutes(r: Run) -> float:
        return estimated_minutes(r.config, "mini")

    shares: list[list[Run]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for run in sorted(runs, key=minutes, reverse=True):
        i = load.index(min(load))
        shares[i].append(run)
        load[i] += max(minutes(run), 1e-6)  # zero-cost estimates still spread out
    return [s for s in shares if s]


class StopOnSignal:
    """In the CLI process while local workers run: SIGINT / SIGTERM are passed on to every
    worker as SIGTERM (submitit's controller forwards it to its task), where the run checkpoints at
    the next step boundary and stops; the CLI then reports and exits non-zero."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.jobs: list = []

    def __enter__(self) -> StopOnSignal:
        try:
            self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        except ValueError:  # not the main thread
            self._old = {}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame) -> None:
        self.signum = signum
        for job in self.jobs:
            proc = getattr(job, "_process", None)  # submitit LocalJob: the controller process
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def submit(self, ex: submitit.Executor, batch: RunBatch):
        """Submit with SIGINT ignored, which the worker processes inherit: a Ctrl-C reaches the whole
        terminal process group, and submitit's controller would otherwise kill its task after 1 s,
        before the checkpoint. The task installs its own handlers (RunBatch)."""
        old = signal.getsignal(signal.SIGINT) if self._old else None
        if self._old:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            job = ex.submit(batch)
        finally:
            if self._old:
                signal.signal(signal.SIGINT, old)
        self.jobs.append(job)
        return job


class BatchStopped(SemclError):
    """The CLI got SIGINT / SIGTERM; its runs are checkpointed. Exit status 128 + signal."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.exit_code = 128 + signum


class LocalBackend(Backend):
    """`local`: the runs in `workers` subprocess jobs on this machine, stage after stage."""

    name = "local"

    def check(self, runs, store: Store, options: LaunchOptions) -> None:
        from semcl.launch.local_fit import refuse_unfit

        pending = {r.run_id for r in runs_to_submit([r for r, _ in runs], store, options.retry_failed)}
        refuse_unfit([(r, res) for r, res in runs if r.run_id in pending], self.name, options.allow_cpu)

    def submit(self, runs, store: Store, options: LaunchOptions) -> None:
        self.check(runs, store, options)  # also for callers that skip `semcl run`
        submit_runs([r for r, _ in runs], store, options.data_root, executor=self.name, workers=options.workers,
                    retry_failed=options.retry_failed)


class DebugBackend(LocalBackend):
    """`debug`: the same stages inside this process (tracebacks shown, a debugger can stop in them)."""

    name = "debug"


def submit_runs(runs: list[Run], store: Store, data_root: Path, *, executor: str = "local",
                workers: int | None = None, retry_failed: bool = False) -> int:
    todo = runs_to_submit(runs, store, retry_failed)
    skipped = len({r.run_id for r in runs}) - len(todo)
    print(f"{len(todo)} runs to submit ({skipped} already done, failed or running elsewhere; "
          "--retry-failed resubmits failed ones)")
    if not todo:
        return 0
    prepare_synthetic_data(todo, store)
    cpus = os.cpu_count() or 1
    ex = submitit.AutoExecutor(folder=store.folders.submitit / "%j", cluster=executor)
    ex.update_parameters(timeout_min=24 * 60)
    failed = 0
    stages = waves(todo)
    with StopOnSignal() as stop:
        for k, wave in enumerate(stages):  # a second stage starts once the runs it builds on are done
            n_workers = max(1, min(workers or min(cpus, 4), len(wave)))
            threads = max(1, cpus // n_workers)
            shares = _split(wave, n_workers) if executor == "local" else [wave]
            jobs = [stop.submit(ex, RunBatch(share, store.root, data_root, threads)) for share in shares]
            stage = f" (stage {k + 1} of {len(stages)})" if len(stages) > 1 else ""
            print(f"submitted {len(wave)} runs as {len(jobs)} {executor} job(s){stage}")
            failed += wait(jobs, wave, store, in_process=executor == "debug", raise_on_failure=False,
                           stop=stop)
            if stop.signum is not None:
                name = signal.Signals(stop.signum).name
                raise BatchStopped(stop.signum, f"stopped by {name}: the interrupted runs keep their checkpoints; "
                                               "run the same command again to resume them")
    if failed:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed


def wait(jobs: list, runs: list[Run], store: Store, *, in_process: bool = False, raise_on_failure: bool = True,
         stop: StopOnSignal | None = None) -> int:
    """Block until the jobs end, showing each active run's line (semcl.launch.live); returns the number of failed
    runs. After a stop signal, one line per interrupted run (where it will resume) instead."""
    from semcl.launch.live import LiveView

    ids = [r.run_id for r in runs]
    if not in_process:  # debug jobs run inside done()/result(): their own step line shows instead
        with LiveView(runs, store) as view:
            while True:
                finished = all(j.done() for j in jobs)
                view.update({i: store.status(i)[0] for i in ids})
                if finished:
                    break
                time.sleep(0.2 if stop is not None and stop.signum is not None else 1.0)
    outcome: dict[str, str] = {}
    for job in jobs:
        try:
            outcome.update(job.result() or {})
        except Exception as err:  # the worker process itself died
            print(f"job {job.job_id} failed: {str(err).splitlines()[-1] if str(err) else err}", file=sys.stderr)
            if note := low_space_note(store.root):  # its error went down with its log: say the likely cause
                print(f"job {job.job_id}: {note}", file=sys.stderr)
    failed = 0
    for run in runs:
        said = outcome.get(run.run_id, "")
        if said.startswith(INTERRUPTED):
            if stop is not None and stop.signum is not None:  # the workers got SIGTERM from us: say what we got
                said = said.replace(f"{INTERRUPTED} by SIGTERM", f"{INTERRUPTED} by {signal.Signals(stop.signum).name}")
            print(f"{run.run_id} {run.row_label} seed={run.seed}: {said}", file=sys.stderr)
            continue
        if said == NOT_STARTED or (stop is not None and stop.signum is not None and not said):
            continue
        status, detail = store.status(run.run_id)
        if said.startswith("skipped"):
            print(f"{run.run_id} {run.row_label} seed={run.seed}: {said}", file=sys.stderr)
        elif status != "done":
            failed += 1
            print(f"{run.run_id} {run.row_label} seed={run.seed}: {status} {detail}", file=sys.stderr)
    if stop is None or stop.signum is None:
        print(f"{len(runs) - failed} of {len(runs)} runs done")
    if failed and raise_on_failure:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed
