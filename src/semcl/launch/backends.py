"""What every backend shares before it submits: which runs go out, the data they need, the shared
synthetic data; and the table of backends (`BACKENDS`: executor name -> its Backend class).

Only runs that are missing or partial go out (failed ones with --retry-failed); a done run is
never resubmitted and an unreadable metrics.json stops the submission before anything starts.
The backends (semcl.launch.base.Backend): `local` (subprocesses on this machine) and `debug` (in-process),
semcl.launch.local; `slurm` (job arrays), semcl.launch.slurm.backend. Each is imported only when named,
so submitit loads only then.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from semcl.errors import ConfigError
from semcl.files import move
from semcl.launch.base import Backend
from semcl.registry.plan import Run
from semcl.store import Store

# executor name -> "module:Class" of its Backend (`semcl run --executor NAME`). Strings, because the
# backends import this module (the shared selection), not the other way round. A new executor is one
# module with a Backend subclass plus one line here.
BACKENDS: dict[str, str] = {
    "local": "semcl.launch.local:LocalBackend",
    "debug": "semcl.launch.local:DebugBackend",
    "slurm": "semcl.launch.slurm.backend:SlurmBackend",
}
DEFAULT_EXECUTOR = "local"


def backend(executor: str) -> Backend:
    """The Backend of `executor` (a key of BACKENDS)."""
    if executor not in BACKENDS:
        raise ConfigError(f"unknown executor {executor!r}; known: {sorted(BACKENDS)}")
    module, _, cls = BACKENDS[executor].partition(":")
    return getattr(importlib.import_module(module), cls)()


def run_states(store: Store, runs: list[Run]) -> list[tuple[str, str]]:
    """(status, detail) per run: what a backend that submitted it knows (a queued SLURM job), else the store's."""
    known: dict[str, tuple[str, str]] = {}
    for name in BACKENDS:
        known.update(backend(name).states(store, runs))
    return [known.get(r.run_id) or store.status(r.run_id) for r in runs]


def check_data_root(runs: list[Run], data_root: Path) -> None:
    """Fail before submitting anything if a dataset a run needs is missing or truncated under the
    data root (cheap header and size checks, semcl.data.check); then the report of every dataset the
    runs need (`semcl data check`'s, without checksums) goes to stderr before the one-line error."""
    from semcl.data.check_report import check_all, failure, needed_datasets, render

    need = needed_datasets(runs)
    checks = check_all(need, data_root)
    err = failure(checks, data_root)
    if err is not None:
        profiles = "/".join(sorted({r.profile for r in runs}))
        print(render(checks, need, data_root, profiles), end="", file=sys.stderr)
        raise err


def runs_to_submit(runs: list[Run], store: Store, retry_failed: bool) -> list[Run]:
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
    by_id, retrain = {r.run_id: r for r in unique}, []
    while True:  # a base retrained may itself build on a done run whose file is gone
        more = [by_id[d] for d in dict.fromkeys(d for r in todo + retrain for d in r.depends_on)
                if d in by_id and by_id[d] not in todo + retrain
                and missing_dependency_file(by_id[d], store, todo + retrain)]
        if not more:
            break
        retrain += more
    for base in retrain:
        kept = set_aside_record(store, base.run_id)
        print(f"{base.run_id} {base.row_label} seed={base.seed}: done, but the file its dependent runs read is gone: "
              f"retraining it (its record is kept as {kept})")
    from semcl.launch.trainings import claim_legacy_trainings, share_trainings

    if not retrain + todo:  # nothing to submit: nothing shares a training, and nothing is written (a read-only store)
        return []
    for line in claim_legacy_trainings(store):
        print(line, file=sys.stderr)
    return share_trainings(retrain + todo, unique, store)


def missing_dependency_file(base: Run, store: Store, todo: list[Run]) -> Path | None:
    """The file of done run `base` that a run of `todo` building on it reads (its final checkpoint; an
    ensemble member's test logits) when that file is gone; None when it is there or `base` is not done."""
    from semcl.methods.registry import METHODS

    if not store.metrics_path(base.run_id).exists():
        return None
    for run in todo:
        if base.run_id in run.depends_on:
            from semcl.methods.spec import DEPENDENCY_FILES

            path = getattr(store.folder(base.run_id), DEPENDENCY_FILES[METHODS[run.config.method.name].depends or "init_from"])
            if not path.exists():
                return path
    return None


def set_aside_record(store: Store, run_id: str) -> Path:
    """Rename a done run's metrics.json (and trained.json) to *.replaced-<time>.json, so that the run
    trains again; nothing is deleted. Returns the record's new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = store.folder(run_id)
    kept = folder.set_aside(folder.metrics.name, stamp)
    for path in (folder.metrics, folder.trained):
        try:
            move(path, folder.set_aside(path.name, stamp))
        except FileNotFoundError:  # another `semcl run` set it aside first, or it never had one
            pass
    return kept


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
