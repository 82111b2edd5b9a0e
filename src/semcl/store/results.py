"""The results store: one folder per run id under the results root's runs/, its finished records (metrics.json,
never rewritten), and the claims of shared trainings (trained/<key>.json).

A run's id hashes its resolved config and seed (semcl.registry.plan), so the same run always lands in the same
folder, a rerun is skipped, and a changed config is a new run. The store never overwrites a finished or unreadable
record. Runs that differ only in how they evaluate share one training: the first to start it claims the key, the
others evaluate that run's final checkpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from semcl.errors import ResultsError
from semcl.files import write_json_atomic
from semcl.locations import results_root
from semcl.store.root import ResultsRoot
from semcl.store.run_folder import STORE_FORMAT, RunFolder


def non_finite(value: Any, key: str = "") -> tuple[str, float] | None:
    """(dotted key, value) of the first NaN or infinite float in a metrics tree, None if there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return key, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = non_finite(v, f"{key}.{k}" if key else str(k))
        if found:
            return found
    return None


class Store:
    """The results store: one folder per run id."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else results_root()
        self.folders = ResultsRoot(self.root)  # every folder under the root, named once

    def run_dir(self, run_id: str) -> Path:
        return self.folders.runs / run_id

    def folder(self, run_id: str) -> RunFolder:
        """The run's folder, whose files RunFolder names (semcl.store.run_folder)."""
        return RunFolder(self.run_dir(run_id))

    def metrics_path(self, run_id: str) -> Path:
        return self.folder(run_id).metrics

    def read_record(self, run_id: str) -> dict | None:
        """The finished record, None if absent; ResultsError if present but unreadable."""
        path = self.metrics_path(run_id)
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text())
        except OSError as err:  # e.g. a folder named metrics.json
            raise ResultsError(f"{path}: unreadable ({err.strerror or err}); move it away to rerun this run") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ResultsError(f"{path}: truncated or invalid JSON ({err}); move the file away to rerun this run") from None
        if not isinstance(record, dict) or not isinstance(record.get("metrics"), dict):
            raise ResultsError(f"{path}: key 'metrics' missing or not a mapping; move the file away to rerun this run")
        if record.get("run_id") != run_id:
            raise ResultsError(f"{path}: key 'run_id' is {record.get('run_id')!r}, expected {run_id!r}")
        fmt = record.get("store_format", 1)
        if not isinstance(fmt, int) or fmt > STORE_FORMAT:
            raise ResultsError(f"{path}: key 'store_format' is {fmt!r}: written by a newer semcl than this one (reads "
                               f"formats 1-{STORE_FORMAT}); read it with that version, or upgrade")
        return record

    def read_config(self, run_id: str) -> dict:
        """The run's config.yaml as the engine wrote it when the run started: {"run_id", "seed", "table", "row",
        "profile", "config": {...}}; ResultsError naming the file when it is absent or unreadable."""
        import yaml

        path = self.folder(run_id).config
        try:
            head = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise ResultsError(f"{path}: no config.yaml (run {run_id} never started)") from None
        except OSError as err:
            raise ResultsError(f"{path}: unreadable ({err.strerror or err})") from None
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise ResultsError(f"{path}: not YAML ({getattr(err, 'problem', None) or err})") from None
        if not isinstance(head, dict) or not isinstance(head.get("config"), dict):
            raise ResultsError(f"{path}: key 'config' is missing or not a mapping")
        return head

    def write_record(self, run_id: str, record: dict) -> None:
        """Write the finished record; a finished metrics.json is never rewritten (ResultsError). A
        non-finite metric (NaN, inf) is refused naming its key: no table could average it."""
        bad = non_finite(record.get("metrics", {}))
        if bad:
            key, value = bad
            raise ResultsError(f"{self.metrics_path(run_id)}: key 'metrics.{key}' is {value!r}, not a finite number: "
                               "the run's evaluation diverged or divided by zero; nothing recorded (its log says more)")
        try:
            write_json_atomic(self.metrics_path(run_id), record, exclusive=True)
        except FileExistsError:
            raise ResultsError(f"{self.metrics_path(run_id)}: run {run_id} already finished; "
                               "its record is never rewritten") from None

    def status(self, run_id: str) -> tuple[str, str]:
        """(status, detail): done / running / partial / failed / missing. `running`: another live
        process owns the run (its lock file, semcl.runtime.runlock), this SLURM job attempt's other ranks included."""
        from semcl.runtime.runlock import running_lock

        try:
            if self.read_record(run_id) is not None:
                return "done", ""
        except ResultsError as err:
            return "failed", str(err)
        folder = self.folder(run_id)
        holder = running_lock(folder.path)
        if holder is not None:
            return "running", f"({holder.describe()})"
        if folder.failed.exists():
            try:
                info = json.loads(folder.failed.read_text())
                return "failed", f"{info.get('error', '?')} (log: {folder.log})"
            except json.JSONDecodeError:
                return "failed", f"see {folder.log}"
        if folder.checkpoint.exists():
            return "partial", "checkpoint present"
        return "missing", ""

    def claim_path(self, train_key: str) -> Path:
        return self.folders.trainings / f"{train_key}.json"

    def trainer_of(self, train_key: str) -> str | None:
        """The run whose folder holds the training of `train_key` (its claim), None when unclaimed."""
        path = self.claim_path(train_key)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise ResultsError(f"{path}: unreadable ({type(err).__name__}); delete it and the next run of this "
                               "training claims it again") from None
        run_id = doc.get("run_id") if isinstance(doc, dict) else None
        if not isinstance(run_id, str) or not run_id.isalnum():
            raise ResultsError(f"{path}: key 'run_id' is {run_id!r}, not a run id; delete the file to reclaim it")
        return run_id

    def trained(self, run_id: str) -> bool:
        """The run's training is over: trained.json, or (a store from before the training stage wrote it
        always) a finished record beside the final checkpoint."""
        folder = self.folder(run_id)
        return folder.trained.exists() or (folder.metrics.exists() and folder.checkpoint.exists())

    def claim_training(self, train_key: str, run_id: str) -> str:
        """The run that trains `train_key`: the claimed one; else `run_id`, claimed now (atomically: of two
        claims at once one wins and both return it). A claim whose run left nothing (no checkpoint, not running,
        not trained) passes to `run_id`."""
        owner = self.trainer_of(train_key)
        if owner == run_id:
            return run_id
        if owner is not None:
            folder = self.folder(owner)
            if folder.checkpoint.exists() or self.trained(owner) or self.status(owner)[0] == "running":
                return owner
        try:
            write_json_atomic(self.claim_path(train_key), {"run_id": run_id, "train_key": train_key},
                              exclusive=owner is None)
        except FileExistsError:
            return self.trainer_of(train_key) or run_id
        return run_id

    def records(self, run_ids: list[str]) -> dict[str, dict]:
        """Finished records of these runs (absent ones skipped; unreadable ones raise)."""
        out = {}
        for rid in run_ids:
            rec = self.read_record(rid)
            if rec is not None:
                out[rid] = rec
        return out
