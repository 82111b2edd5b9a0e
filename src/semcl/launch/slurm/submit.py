"""Submit runs to SLURM: job arrays grouped by their sbatch request, second stages after their bases
(afterok), a multi-GPU run's evaluations as their own array (aftercorr), the manifest of job <-> run,
and `plan --executor slurm`'s preview rendered by the same code."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import submitit
from submitit.core.utils import FailedJobError

from semcl.errors import SemclError
from semcl.estimate.cost import estimated_minutes
from semcl.launch.backends import prepare_synthetic_data, runs_to_submit
from semcl.launch.slurm.job import RunJob
from semcl.launch.slurm.profile import (
    ClusterProfile,
    evaluation_parameters,
    max_array_size,
    separate_evaluation,
    signature,
    slurm_parameters,
)
from semcl.registry.plan import Run, waves
from semcl.registry.resources import Resources
from semcl.store import ResultsRoot, Store


def slurm_groups(runs: list[tuple[Run, Resources]], cluster: ClusterProfile) -> list[tuple[dict, list[Run]]]:
    """Runs grouped by identical sbatch parameters, in first-seen order."""
    groups: dict[tuple, tuple[dict, list[Run]]] = {}
    from semcl.methods.registry import method_spec

    for run, res in runs:
        # a method that builds no network trains nothing here: its program (detectron2) gets the job's GPUs
        single = method_spec(run.config.method.name).builder is None
        params = slurm_parameters(res, cluster, f"{run.table_id} ({run.profile})",
                                  estimated_minutes(run.config, run.profile, res.gpus, cluster.cpus_per_gpu),
                                  single_process=single)
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
    ex = cls(folder=folder / "%j", max_num_timeout=cluster.max_requeues, python=cluster.python)  # None: sys.executable
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
    ex = slurm_executor(ResultsRoot(root).submitit, params, cluster, len(chunk), setup,
                        f"semcl-{chunk[0].table_id.replace('/', '-')}", cls)
    if after:  # a failed base cancels its second stages instead of leaving them pending
        ex.update_parameters(dependency="afterok:" + ":".join(after),
                             additional_parameters={**params.get("additional_parameters", {}),
                                                    "kill-on-invalid-dep": "yes"})
    return ex


def sbatch_script(ex: submitit.SlurmExecutor, n: int) -> str:
    """The sbatch script `ex` writes for an array of `n` runs: submitit's own rendering, with the
    parameters its array submission adds (map_count -> --array)."""
    copy = PreviewExecutor(ex.folder, ex.max_num_timeout, python=ex.python)
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
    setup = job_setup_lines(ResultsRoot(root).snapshots / "<snapshot>")
    job_of: dict[str, str] = {}
    lines = []
    for k, (params, chunk) in enumerate(array_chunks(unique, [], res_of, cluster, max_array_size() - 1)):
        after = sorted({job_of[d] for r in chunk for d in r.after if d in job_of})
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
    ex = slurm_executor(ResultsRoot(root).submitit, eparams, cluster, len(chunk), setup,
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
    from semcl.launch.slurm.manifest import job_ids, latest_jobs, run_state, write_manifest
    from semcl.runtime.slurm_state import sacct_states
    from semcl.snapshot import job_setup_lines, make_snapshot

    todo = runs_to_submit([r for r, _ in runs], store, retry_failed)
    res_of = evaluation_resources(todo, {r.run_id: res for r, res in runs}, store, cluster)
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
    refused = None
    for params, chunk in array_chunks(todo, queued, res_of, cluster, max_array_size() - 1):
        after = sorted({job_of[d] for r in chunk for d in r.after if d in job_of})
        split = separate_evaluation(params)
        ex = array_executor(root, params, cluster, chunk, job_setup_lines(snap), after)
        try:
            with ex.batch():
                submitted = [ex.submit(RunJob(r, root, data_root.resolve(), cluster, "train" if split else "all"))
                             for r in chunk]
        except FailedJobError as err:  # sbatch said no: what went out before is still recorded below
            refused = sbatch_refusal(err, chunk, "")
            break
        try:
            evaluations = submit_evaluations(root, params, cluster, chunk, job_setup_lines(snap), submitted,
                                             data_root) if split else [None] * len(chunk)
        except FailedJobError as err:  # the training array is queued: record it without its evaluations
            refused, evaluations = sbatch_refusal(err, chunk, "evaluation "), [None] * len(chunk)
        for run, job, ev in zip(chunk, submitted, evaluations, strict=True):
            job_of[run.run_id] = ev.job_id if ev is not None else job.job_id
            entries.append({"job_id": job.job_id, "run_id": run.run_id, "table": run.table_id,
                            "row": run.row_label, "seed": run.seed, "profile": run.profile,
                            "folder": str(ResultsRoot(root).submitit / job.job_id),
                            **({"eval_job_id": ev.job_id, "eval_folder": str(ResultsRoot(root).submitit / ev.job_id)}
                               if ev is not None else {}),
                            **({"after": after} if after else {})})
        if refused:
            break
    if not entries:
        raise SemclError(refused)
    info = json.loads((snap / "snapshot.json").read_text())
    path = write_manifest(store, {"executor": "slurm", "cluster": cluster.name, "snapshot": str(snap),
                                  "commit": info["commit"], "dirty": info["dirty"],
                                  "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, entries)
    arrays = sorted({e["job_id"].split("_")[0] for e in entries})
    print(f"submitted {len(entries)} runs as {len(arrays)} array(s): {', '.join(arrays)}; manifest {path}")
    if refused:
        raise SemclError(f"{refused}; the {len(entries)} run(s) queued before it are recorded in {path}")
    return path


def evaluation_resources(todo: list[Run], res_of: dict[str, Resources], store: Store,
                         cluster: ClusterProfile) -> dict[str, Resources]:
    """What each run's job holds: a GPU run that only evaluates another run's training (semcl.launch.trainings)
    holds the cluster's evaluation GPUs and time, not the row's training GPUs."""
    from semcl.launch.trainings import evaluates_only

    out = dict(res_of)
    for run in todo:
        if out[run.run_id].gpus and evaluates_only(run, store):
            out[run.run_id] = Resources(gpus=cluster.eval_gpus, time_min=cluster.eval_time_min)
    return out


def sbatch_refusal(err: Exception, chunk: list[Run], what: str) -> str:
    """One line: which array sbatch refused, and sbatch's own last words."""
    said = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return (f"sbatch refused the {what}array of {len(chunk)} run(s) of {chunk[0].table_id} ({chunk[0].profile}): "
            f"{said[-1] if said else type(err).__name__}; nothing of it was queued")
