"""Submit runs through submitit: `local` (subprocesses on this machine) and `debug` (in-process).

Only runs that are missing or partial go out (failed ones with --retry-failed); a done run is
never resubmitted and an unreadable metrics.json stops the submission before anything starts.
On the local executor the runs are split into `workers` jobs that each work through their
share in turn, which bounds concurrency and pays torch's import once per worker.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import submitit

from semcl.cluster import ClusterProfile, Resources, max_array_size, signature, slurm_parameters
from semcl.errors import ResultsError
from semcl.runs import Run, Store, estimate_cost, waves


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
    from semcl.data.layout import check_root, require
    from semcl.data.registry import dataset_spec

    needed = sorted({n for r in runs if not r.config.data.synthetic for n in (r.config.data.name, *r.config.eval.ood)})
    for name in needed:
        check_root(data_root, name)
        require(data_root, dataset_spec(name).folder, name)


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
    prepare_synthetic_data(todo, store)
    cpus = os.cpu_count() or 1
    ex = submitit.AutoExecutor(folder=store.root / "submitit" / "%j", cluster=executor)
    ex.update_parameters(timeout_min=24 * 60)
    failed = 0
    stages = waves(todo)
    for k, wave in enumerate(stages):  # a second stage starts once the runs it builds on are done
        n_workers = max(1, min(workers or min(cpus, 4), len(wave)))
        threads = max(1, cpus // n_workers)
        shares = _split(wave, n_workers) if executor == "local" else [wave]
        jobs = [ex.submit(RunBatch(share, store.root, data_root, threads)) for share in shares]
        stage = f" (stage {k + 1} of {len(stages)})" if len(stages) > 1 else ""
        print(f"submitted {len(wave)} runs as {len(jobs)} {executor} job(s), {threads} thread(s) each{stage}")
        failed += wait(jobs, wave, store, in_process=executor == "debug", raise_on_failure=False)
    if failed:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed


def wait(jobs: list, runs: list[Run], store: Store, *, in_process: bool = False, raise_on_failure: bool = True) -> int:
    """Block until the jobs end, showing progress; returns the number of failed runs."""
    from tqdm import tqdm

    ids = [r.run_id for r in runs]
    with tqdm(total=len(ids), unit="run", file=sys.stderr, disable=in_process) as bar:
        while not in_process:
            finished = all(j.done() for j in jobs)  # debug jobs run inside done()/result()
            states = [store.status(i)[0] for i in ids]
            settled = sum(s in ("done", "failed") for s in states)
            if settled != bar.n:  # redraw only on progress (logs stay short when stderr is a file)
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
    if failed and raise_on_failure:
        raise ResultsError(f"{failed} run(s) did not finish; see the log paths above")
    return failed


# ---------------------------------------------------------------- SLURM: arrays, requeue, manifest


class RunJob(submitit.helpers.Checkpointable):
    """One run as one array task. On the requeue signal the train loop checkpoints at the next step
    boundary and submitit resubmits this same object, which resumes from the checkpoint."""

    def __init__(self, run: Run, store_root: Path, data_root: Path):
        self.run, self.store_root, self.data_root = run, store_root, data_root

    def __call__(self) -> str:
        import torch

        from semcl.engine import distributed, interrupt
        from semcl.engine.job import execute_run

        interrupt.defer_signal()
        torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
        device = distributed.init_from_slurm()  # several tasks: one process per GPU
        store = Store(self.store_root)
        if store.status(self.run.run_id)[0] != "done":
            execute_run(self.run, store, self.data_root, device)
        return self.run.run_id


def slurm_groups(runs: list[tuple[Run, Resources]], cluster: ClusterProfile) -> list[tuple[dict, list[Run]]]:
    """Runs grouped by identical sbatch parameters, in first-seen order."""
    groups: dict[tuple, tuple[dict, list[Run]]] = {}
    for run, res in runs:
        params = slurm_parameters(res, cluster, f"{run.table_id} ({run.profile})")
        groups.setdefault(signature(params), (params, []))[1].append(run)
    return list(groups.values())


def slurm_executor(folder: Path, params: dict, cluster: ClusterProfile, n: int, setup: list[str],
                   name: str) -> submitit.SlurmExecutor:
    ex = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=cluster.max_requeues)
    ex.update_parameters(**params, array_parallelism=max(1, min(cluster.array_parallelism, n)),
                         setup=[*cluster.setup, *setup], job_name=name)
    return ex


def describe_arrays(runs: list[tuple[Run, Resources]], cluster: ClusterProfile, store: Store) -> str:
    """What `run --executor slurm` would submit: per array, its runs and the sbatch header."""
    lines = []
    for params, group in slurm_groups(runs, cluster):
        ex = slurm_executor(store.root.resolve() / "submitit", params, cluster, len(group), [], "semcl")
        header = [ln for ln in ex._make_submission_file_text("<command>", "<uid>").splitlines()
                  if ln.startswith("#SBATCH")]
        lines.append(f"# array of {len(group)} runs: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())))
        lines += header
    return "\n".join(lines)


def submit_slurm(runs: list[tuple[Run, Resources]], store: Store, data_root: Path, cluster: ClusterProfile,
                 *, retry_failed: bool = False) -> Path | None:
    """Submit the missing runs as job arrays and return at once; the manifest records job <-> run."""
    from semcl.manifest import latest_jobs, run_state, sacct_states, write_manifest
    from semcl.snapshot import job_setup_lines, make_snapshot

    res_of = {r.run_id: res for r, res in runs}
    todo = select([r for r, _ in runs], store, retry_failed)
    jobs = latest_jobs(store)
    states = sacct_states([jobs[r.run_id]["job_id"] for r in todo if r.run_id in jobs])
    queued = [r for r in todo if run_state(store, r.run_id, jobs.get(r.run_id), states)[0]
              in ("pending", "running", "requeued")]
    todo = [r for r in todo if r not in queued]
    settled = len({r.run_id for r, _ in runs}) - len(todo) - len(queued)
    print(f"{len(todo)} runs to submit ({settled} already done or failed, {len(queued)} queued or running)")
    if not todo:
        return None
    root = store.root.resolve()
    prepare_synthetic_data(todo, store)
    snap = make_snapshot(root)
    limit = max_array_size() - 1
    entries = []
    # job of each run that is queued or submitted now: second stages wait for them (afterok)
    job_of = {r.run_id: jobs[r.run_id]["job_id"] for r in queued}
    for wave in waves(todo + queued):
        wave = [r for r in wave if r not in queued]
        for params, group in slurm_groups([(r, res_of[r.run_id]) for r in wave], cluster):
            for start in range(0, len(group), limit):  # arrays larger than MaxArraySize are chunked
                chunk = group[start:start + limit]
                ex = slurm_executor(root / "submitit", params, cluster, len(chunk), job_setup_lines(snap),
                                    f"semcl-{chunk[0].table_id.replace('/', '-')}")
                after = sorted({job_of[d] for r in chunk for d in r.depends_on if d in job_of})
                if after:  # a failed base cancels its second stages instead of leaving them pending
                    ex.update_parameters(dependency="afterok:" + ":".join(after),
                                         additional_parameters={**params.get("additional_parameters", {}),
                                                                "kill-on-invalid-dep": "yes"})
                with ex.batch():
                    submitted = [ex.submit(RunJob(r, root, data_root.resolve())) for r in chunk]
                for run, job in zip(chunk, submitted, strict=True):
                    job_of[run.run_id] = job.job_id
                    entries.append({"job_id": job.job_id, "run_id": run.run_id, "table": run.table_id,
                                    "row": run.row_label, "seed": run.seed, "profile": run.profile,
                                    "folder": str(root / "submitit" / job.job_id),
                                    **({"after": after} if after else {})})
    info = json.loads((snap / "snapshot.json").read_text())
    path = write_manifest(store, {"executor": "slurm", "cluster": cluster.name, "snapshot": str(snap),
                                  "commit": info["commit"], "dirty": info["dirty"],
                                  "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, entries)
    arrays = sorted({e["job_id"].split("_")[0] for e in entries})
    print(f"submitted {len(entries)} runs as {len(arrays)} array(s): {', '.join(arrays)}; manifest {path}")
    return path
