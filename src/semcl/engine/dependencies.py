"""The runs a run builds on (a base run, a teacher, ensemble members), handed to its method as
`semcl.methods.base.Dependency` objects that load what the method asks for, safely and lazily."""

from __future__ import annotations

from semcl.errors import ResultsError
from semcl.methods.base import Dependency
from semcl.methods.spec import DEPENDENCY_KINDS
from semcl.registry.plan import Run
from semcl.runtime.checkpoint import safe_load
from semcl.store import Store


def _finished(store: Store, run_id: str, what: str) -> None:
    status = store.status(run_id)[0]
    if status != "done":
        raise ResultsError(f"{store.run_dir(run_id)}: {what} {run_id} is not finished (status: {status})")


def _load(path, what: str, run_id: str, keys: set[str], rerun: str = "") -> dict:
    """The file's dict, loaded with weights_only (a shared results folder never runs code);
    ResultsError naming the file and what to do when it is missing, refused or not what it should be.
    `rerun`: the command that retrains a finished run whose file is gone (semcl.launch.backends.runs_to_submit does)."""
    remedy = f"delete it and rerun {what} {run_id}"
    if not path.exists():
        way_out = (f"`{rerun}` retrains it (its record is kept aside) and then this run" if rerun
                   else f"move {what} {run_id}'s metrics.json away and rerun it")
        raise ResultsError(f"{path}: missing, though {what} {run_id} is done; {way_out}")
    content = safe_load(path, remedy=remedy)
    if not isinstance(content, dict) or not keys <= set(content):
        raise ResultsError(f"{path}: not the expected file (keys {', '.join(sorted(keys))}); {remedy}")
    return content


def dependencies(run: Run, store: Store, kind: str | None) -> list[Dependency]:
    """One Dependency per run id in `run.depends_on`, in the row's order; each checks that the run
    finished before it loads anything from it."""
    out = []
    what = DEPENDENCY_KINDS.get(kind or "", "run")
    rerun = f"semcl run {run.table_id} --profile {run.profile} --retry-failed"
    for rid in run.depends_on:
        folder = store.folder(rid)

        def state(rid=rid, folder=folder) -> dict:
            _finished(store, rid, what)
            return _load(folder.checkpoint, what, rid, {"method"}, rerun)["method"]

        def logits(rid=rid, folder=folder) -> dict:
            _finished(store, rid, what)
            return _load(folder.logits, what, rid, {"logits", "labels", "train_counts"}, rerun)

        def metrics(rid=rid) -> dict:
            _finished(store, rid, what)
            return store.read_record(rid)["metrics"]

        out.append(Dependency(kind or "", rid, folder.path, state, logits, metrics))
    return out
