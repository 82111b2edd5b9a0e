"""Submit runs through submitit: `local` (subprocesses on this machine) and `debug` (in-process).

Only runs that are missing or partial go out (failed ones with --retry-failed); a done run is
never resubmitted and an unreadable metrics.json stops the submission before anything starts.
On the local executor the runs are split into `workers` jobs that each work through their
share in turn, which bounds concurrency and pays torch's import once per worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import submitit

from semcl.cluster import (
    ClusterProfile,
    Resources,
    evaluation_parameters,
    max_array_size,
    separate_evaluation,
    signature,
    slurm_parameters,
)
from semcl.errors import ResultsError, SemclError
from semcl.runlock import RunOwned, owner, run_lock
from semcl.runs import Run, Store, estimated_minutes, waves


class RunBatch:
    """The job: execute several runs in turn; one run's failure does not stop the others.

    Each run is trained under its lock (semcl.runlock): a run that another live process owns is
    skipped. SIGTERM / SIGINT stop the batch: the current run checkpoints at the next step
    boundary, the rest do not start, and the outcome says so."""

    def __init__(self, runs: list[Run], store_root: Path, data_root: Path, threads: int):
        self.runs, self.store_root, self.data_root, self.threads = runs, store_root, data_root, threads

    def __call__(self) -> dict[str, str]:
        import torch

        from semcl.engine import interrupt
        from semcl.engine.job import execute_run

        torch.set_num_threads(self.threads)
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
    from semcl.engine.checkpoint import load

    try:
        state = load(store.run_dir(run_id) / "checkpoints" / "last.pt")
    except ResultsError as err:
        return str(err)
    if state is None:
        return "no checkpoint yet (a rerun starts it afresh)"
    return f"checkpoint at epoch {state['epoch']} step {state.get('step', 0)}"


def check_data_root(runs: list[Run], data_root: Path) -> None:
    """Fail before submitting anything if a dataset a run needs is missing or truncated under the
    data root (cheap header and size checks, semcl.data.check)."""
    from semcl.data.check import check_dataset

    needed = sorted({n for r in runs if not r.config.data.synthetic for n in (r.config.data.name, *r.config.eval.ood)})
    for name in needed:
        check_dataset(name, data_root)


def select(runs: list[Run], store: Store, retry_failed: bool) -> list[Run]:
    """The runs to submit: missing or partial ones (failed ones with `retry_failed`). A run another
    live process owns (its lock) is skipped with one line saying who runs it."""
    unique = list({r.run_id: r for r in runs}.values())  # two tables may share a run
    todo = []
    for run in unique:
        if store.metrics_path(run.run_id).exists():
            store.read_record(run.run_id)  # raises ResultsError (one line) if unreadable
            continue
        status, detail = store.status(run.run_id)
        if status == "running":
            print(f"{run.run_id} {run.row_label} seed={run.seed}: running {detail}: skipped")
        if status in ("missing", "partial") or (status == "failed" and retry_failed):
            todo.append(run)
    return todo


def prepare_synthetic_data(runs: list[Run], store: Store) -> None:
    """Write the synthetic data the runs share once, here, before any job reads it."""
    synthetic = [r for r in runs if r.config.data.synthetic]
    if synthetic:
        from semcl.engine.job import prepare_synthetic

        d = [(r.config.data, tuple(r.config.eval.ood)) for r in synthetic]
        keys = {(x.name, x.synthetic_train_per_class, x.synthetic_test_per_class, ood): r for (x, ood), r in zip(d, synthetic,
                                                                                                           strict=True)}
        for run in keys.values():
            prepare_synthetic(run, store)


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


class Interrupted(SemclError):
    """The CLI got SIGINT / SIGTERM; its runs are checkpointed. Exit status 128 + signal."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.exit_code = 128 + signum


def submit_runs(runs: list[Run], store: Store, data_root: Path, *, executor: str = "local",
                workers: int | None = None, retry_failed: bool = False) -> int:
    todo = select(runs, store, retry_failed)
    skipped = len({r.run_id for r in runs}) - len(todo)
    print(f"{len(todo)} runs to submit ({skipped} already done, failed or running elsewhere; "
          "--retry-failed resubmits failed ones)")
    if not todo:
        return 0
    prepare_synthetic_data(todo, store)
    cpus = os.cpu_count() or 1
    ex = submitit.AutoExecutor(folder=store.root / "submitit" / "%j", cluster=executor)
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
            print(f"submitted {len(wave)} runs as {len(jobs)} {executor} job(s), {threads} thread(s) each{stage}")
            failed += wait(jobs, wave, store, in_process=executor == "debug", raise_on_failure=False,
                           stop=stop)
            if stop.signum is not None:
                name = signal.Signals(stop.signum).name
                raise Interrupted(stop.signum, f"stopped by {name}: the interrupted runs keep their checkpoints; "
                                               "run the same command again to resume them")
    if failed:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed


def wait(jobs: list, runs: list[Run], store: Store, *, in_process: bool = False, raise_on_failure: bool = True,
         stop: StopOnSignal | None = None) -> int:
    """Block until the jobs end, showing progress; returns the number of failed runs. After a stop
    signal, one line per interrupted run (where it will resume) instead."""
    from tqdm import tqdm

    ids = [r.run_id for r in runs]
    with tqdm(total=len(ids), unit="run", file=sys.stderr, disable=in_process) as bar:
        while not in_process:
            finished = all(j.done() for j in jobs)  # debug jobs run inside done()/result()
            states = [store.status(i)[0] for i in ids]
            settled = sum(s in ("done", "failed") for s in states)
            if settled != bar.n and settled >= bar.n:  # redraw only on progress (logs stay short in files)
                bar.update(settled - bar.n)
            if finished:
                break
            time.sleep(0.2 if stop is not None and stop.signum is not None else 1.0)
    outcome: dict[str, str] = {}
    for job in jobs:
        try:
            outcome.update(job.result() or {})
        except Exception as err:  # the worker process itself died
            print(f"job {job.job_id} failed: {str(err).splitlines()[-1] if str(err) else err}", file=sys.stderr)
    failed = 0
    for run in runs:
        said = outcome.get(run.run_id, "")
        if said.startswith(INTERRUPTED):
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


# ---------------------------------------------------------------- SLURM: arrays, requeue, manifest


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

        from semcl.engine import distributed, interrupt
        from semcl.engine.job import execute_run
        from semcl.engine.train import CHECKPOINT_EVERY_ENV

        interrupt.defer_signal()
        os.environ.setdefault(distributed.TIMEOUT_ENV, str(self.cluster.collective_timeout_s))
        os.environ.setdefault(CHECKPOINT_EVERY_ENV, str(self.cluster.checkpoint_every_min))
        store = Store(self.store_root)
        folder = store.run_dir(self.run.run_id)
        holder = owner(folder)  # every rank checks, so all of them skip together
        if holder is not None:
            print(f"{self.run.run_id}: running ({holder.describe()}); skipped", file=sys.stderr)
            return self.run.run_id
        torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
        device = distributed.init_from_slurm()  # several tasks: one process per GPU
        if store.status(self.run.run_id)[0] != "done":
            try:
                # rank 0 owns the run (a requeued job takes over its own earlier lock)
                with run_lock(folder) if distributed.rank() == 0 else contextlib.nullcontext():
                    execute_run(self.run, store, self.data_root, device, stage=self.stage)
            except Exception as err:
                if distributed.is_distributed() and distributed.is_peer_fault(err):
                    requeue_after_fault(err, self.cluster.max_fault_requeues)
                raise
        return self.run.run_id


def requeue_after_fault(err: BaseException, max_requeues: int) -> None:
    """A peer rank died: requeue this job (it resumes from the last checkpoint) while fewer than
    `max_requeues` restarts were made, then wait to be stopped by SLURM; returns when it gives up."""
    from semcl.engine import distributed

    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    job_id = submitit.JobEnvironment().job_id
    first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
    if restarts >= max_requeues:
        print(f"rank {distributed.rank()}: a peer rank failed ({first}); {restarts} restart(s) made, "
              f"max_fault_requeues {max_requeues}: job {job_id} fails", file=sys.stderr, flush=True)
        return
    print(f"rank {distributed.rank()}: a peer rank failed ({first}); requeueing job {job_id} "
          f"(restart {restarts + 1} of at most {max_requeues}), it resumes from its last checkpoint",
          file=sys.stderr, flush=True)
    done = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    # a job another rank has requeued already answers that it is pending: wait for the end as well
    if done.returncode != 0 and "pending" not in done.stderr.lower():
        print(f"scontrol requeue {job_id}: {done.stderr.strip()}", file=sys.stderr, flush=True)
        return
    time.sleep(300)  # SLURM ends this step now; exiting first could record the job as failed
    os._exit(1)


def slurm_groups(runs: list[tuple[Run, Resources]], cluster: ClusterProfile) -> list[tuple[dict, list[Run]]]:
    """Runs grouped by identical sbatch parameters, in first-seen order."""
    groups: dict[tuple, tuple[dict, list[Run]]] = {}
    for run, res in runs:
        params = slurm_parameters(res, cluster, f"{run.table_id} ({run.profile})",
                                  estimated_minutes(run.config, run.profile))
        groups.setdefault(signature(params), (params, []))[1].append(run)
    return list(groups.values())


class PreviewExecutor(submitit.SlurmExecutor):
    """A SlurmExecutor that never submits, for `plan --executor slurm` on machines without `srun`
    (the only difference: submitit's check for srun); it renders scripts with the inherited code."""

    @classmethod
    def affinity(cls) -> int:
        return 1

    def _submit_command(self, command: str):
        raise RuntimeError("a preview executor does not submit")


def slurm_executor(folder: Path, params: dict, cluster: ClusterProfile, n: int, setup: list[str],
                   name: str, cls: type[submitit.SlurmExecutor] = submitit.SlurmExecutor) -> submitit.SlurmExecutor:
    ex = cls(folder=folder / "%j", max_num_timeout=cluster.max_requeues)
    ex.update_parameters(**params, array_parallelism=max(1, min(cluster.array_parallelism, n)),
                         setup=[*cluster.setup, *setup], job_name=name)
    return ex


def array_chunks(todo: list[Run], queued: list[Run], res_of: dict[str, Resources], cluster: ClusterProfile,
                 limit: int) -> Iterator[tuple[dict, list[Run]]]:
    """(sbatch parameters, runs) of each array to submit, in dependency order: runs grouped by
    request, arrays larger than MaxArraySize chunked; `queued` runs are already in the queue."""
    for wave in waves(todo + queued):
        wave = [r for r in wave if r not in queued]
        for params, group in slurm_groups([(r, res_of[r.run_id]) for r in wave], cluster):
            for start in range(0, len(group), limit):
                yield params, group[start:start + limit]


def array_executor(root: Path, params: dict, cluster: ClusterProfile, chunk: list[Run], setup: list[str],
                   after: list[str], cls: type[submitit.SlurmExecutor] = submitit.SlurmExecutor
                   ) -> submitit.SlurmExecutor:
    """The executor that submits one array: used for the submission and for its preview alike."""
    ex = slurm_executor(root / "submitit", params, cluster, len(chunk), setup,
                        f"semcl-{chunk[0].table_id.replace('/', '-')}", cls)
    if after:  # a failed base cancels its second stages instead of leaving them pending
        ex.update_parameters(dependency="afterok:" + ":".join(after),
                             additional_parameters={**params.get("additional_parameters", {}),
                                                    "kill-on-invalid-dep": "yes"})
    return ex


def sbatch_script(ex: submitit.SlurmExecutor, n: int) -> str:
    """The sbatch script `ex` writes for an array of `n` runs: submitit's own rendering, with the
    parameters its array submission adds (map_count -> --array)."""
    copy = PreviewExecutor(ex.folder, ex.max_num_timeout)
    copy.update_parameters(**ex.parameters)
    if n > 1:
        copy.parameters["map_count"] = n
    return copy._make_submission_file_text(ex._submitit_command_str, "preview")


def describe_arrays(runs: list[tuple[Run, Resources]], cluster: ClusterProfile, store: Store) -> str:
    """What `run --executor slurm` would submit: per array, its runs and the whole sbatch script,
    rendered by the code that submits it. Values known only at submission are placeholders: the
    code snapshot folder and the job ids of the arrays a second stage waits for."""
    from semcl.snapshot import job_setup_lines

    root = store.root.resolve()
    res_of = {r.run_id: res for r, res in runs}
    unique = list({r.run_id: r for r, _ in runs}.values())
    setup = job_setup_lines(root / "snapshots" / "<snapshot>")
    job_of: dict[str, str] = {}
    lines = []
    for k, (params, chunk) in enumerate(array_chunks(unique, [], res_of, cluster, max_array_size() - 1)):
        after = sorted({job_of[d] for r in chunk for d in r.depends_on if d in job_of})
        ex = array_executor(root, params, cluster, chunk, setup, after, PreviewExecutor)
        ids = [f"<array{k + 1}>_{i}" if len(chunk) > 1 else f"<job{k + 1}>" for i in range(len(chunk))]
        lines.append(f"# array of {len(chunk)} runs: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())))
        lines.append(sbatch_script(ex, len(chunk)).rstrip("\n"))
        if separate_evaluation(params):  # the evaluations: their own array on one GPU, task by task after training
            ev = evaluation_executor(root, params, cluster, chunk, setup, ids, PreviewExecutor)
            eparams = {k: v for k, v in ev.parameters.items() if k not in ("setup", "job_name", "array_parallelism")}
            lines.append(f"# evaluation array of {len(chunk)} runs (after <array{k + 1}>'s tasks): "
                         + ", ".join(f"{k}={v}" for k, v in sorted(eparams.items())))
            lines.append(sbatch_script(ev, len(chunk)).rstrip("\n"))
            ids = [i.replace(f"<array{k + 1}>", f"<array{k + 1}-eval>").replace(f"<job{k + 1}>", f"<job{k + 1}-eval>")
                   for i in ids]
        for run, job in zip(chunk, ids, strict=True):
            job_of[run.run_id] = job
    return "\n".join(lines)


def evaluation_dependency(training_ids: list[str]) -> str:
    """Each evaluation task waits for its own training task: aftercorr between two arrays of the same
    size, afterok on a plain job."""
    first = training_ids[0]
    return f"aftercorr:{first.split('_')[0]}" if "_" in first else f"afterok:{first}"


def evaluation_executor(root: Path, params: dict, cluster: ClusterProfile, chunk: list[Run], setup: list[str],
                        training_ids: list[str], cls: type[submitit.SlurmExecutor] = submitit.SlurmExecutor
                        ) -> submitit.SlurmExecutor:
    """The executor of the evaluation array that follows a multi-task training array."""
    eparams = evaluation_parameters(params, cluster, f"{chunk[0].table_id} ({chunk[0].profile})")
    ex = slurm_executor(root / "submitit", eparams, cluster, len(chunk), setup,
                        f"semcl-{chunk[0].table_id.replace('/', '-')}-eval", cls)
    ex.update_parameters(dependency=evaluation_dependency(training_ids),
                         additional_parameters={**eparams.get("additional_parameters", {}), "kill-on-invalid-dep": "yes"})
    return ex


def submit_evaluations(root: Path, params: dict, cluster: ClusterProfile, chunk: list[Run], setup: list[str],
                       training: list, data_root: Path) -> list:
    ex = evaluation_executor(root, params, cluster, chunk, setup, [j.job_id for j in training])
    with ex.batch():
        return [ex.submit(RunJob(r, root, data_root.resolve(), cluster, "evaluate")) for r in chunk]


def submit_slurm(runs: list[tuple[Run, Resources]], store: Store, data_root: Path, cluster: ClusterProfile,
                 *, retry_failed: bool = False) -> Path | None:
    """Submit the missing runs as job arrays and return at once; the manifest records job <-> run."""
    from semcl.manifest import job_ids, latest_jobs, run_state, sacct_states, write_manifest
    from semcl.snapshot import job_setup_lines, make_snapshot

    res_of = {r.run_id: res for r, res in runs}
    todo = select([r for r, _ in runs], store, retry_failed)
    jobs = latest_jobs(store)
    states = sacct_states(job_ids([jobs[r.run_id] for r in todo if r.run_id in jobs]))
    queued = [r for r in todo if run_state(store, r.run_id, jobs.get(r.run_id), states)[0]
              in ("pending", "running", "requeued")]
    todo = [r for r in todo if r not in queued]
    settled = len({r.run_id for r, _ in runs}) - len(todo) - len(queued)
    print(f"{len(todo)} runs to submit ({settled} already done, failed or running elsewhere, {len(queued)} queued or running)")
    if not todo:
        return None
    root = store.root.resolve()
    prepare_synthetic_data(todo, store)
    snap = make_snapshot(root)
    entries = []
    # job of each run that is queued or submitted now (its evaluation job where it has one): second
    # stages wait for them (afterok)
    job_of = {r.run_id: jobs[r.run_id].get("eval_job_id", jobs[r.run_id]["job_id"]) for r in queued}
    for params, chunk in array_chunks(todo, queued, res_of, cluster, max_array_size() - 1):
        after = sorted({job_of[d] for r in chunk for d in r.depends_on if d in job_of})
        split = separate_evaluation(params)
        ex = array_executor(root, params, cluster, chunk, job_setup_lines(snap), after)
        with ex.batch():
            submitted = [ex.submit(RunJob(r, root, data_root.resolve(), cluster, "train" if split else "all"))
                         for r in chunk]
        evaluations = submit_evaluations(root, params, cluster, chunk, job_setup_lines(snap), submitted,
                                         data_root) if split else [None] * len(chunk)
        for run, job, ev in zip(chunk, submitted, evaluations, strict=True):
            job_of[run.run_id] = ev.job_id if ev is not None else job.job_id
            entries.append({"job_id": job.job_id, "run_id": run.run_id, "table": run.table_id,
                            "row": run.row_label, "seed": run.seed, "profile": run.profile,
                            "folder": str(root / "submitit" / job.job_id),
                            **({"eval_job_id": ev.job_id, "eval_folder": str(root / "submitit" / ev.job_id)}
                               if ev is not None else {}),
                            **({"after": after} if after else {})})
    info = json.loads((snap / "snapshot.json").read_text())
    path = write_manifest(store, {"executor": "slurm", "cluster": cluster.name, "snapshot": str(snap),
                                  "commit": info["commit"], "dirty": info["dirty"],
                                  "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, entries)
    arrays = sorted({e["job_id"].split("_")[0] for e in entries})
    print(f"submitted {len(entries)} runs as {len(arrays)} array(s): {', '.join(arrays)}; manifest {path}")
    return path
