"""Runs, their ids, and the results store (results/runs/<run_id>/).

A Run is (table, row, seed, profile) with its resolved config. The id hashes the config's
result-defining part and the seed, so the same run always lands in the same folder, a rerun
is skipped, and a changed config is a new run. The store never overwrites a finished or
unreadable record.

Training is keyed by what trains it: a run's training key hashes the config without its evaluation settings
(`eval`, `probe`, the test split and its limit), the seed, and the training keys of the runs whose weights it
starts from. Runs that differ only in how they evaluate share one training: the first to start it claims the
key (results/trained/<key>.json names its run), the others evaluate that run's final checkpoint. Run ids keep
hashing the whole config, so a store written before training keys reads back unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semcl.config import RunConfig, hashable_config
from semcl.errors import ResultsError
from semcl.files import write_json_atomic
from semcl.locations import results_root
from semcl.registry.tables import Table
from semcl.run_folder import STORE_FORMAT, TRAININGS, RunFolder


@dataclass(frozen=True)
class Run:
    table_id: str
    row_label: str
    seed: int
    profile: str
    config: RunConfig
    run_id: str
    # runs this one reads (a base run's weights, an ensemble's members), in the row's order
    depends_on: tuple[str, ...] = ()
    # what trains it (module docstring): runs with one training key share one training
    train_key: str = ""
    # runs that must finish first without being read (the run that trains this one's shared key); not in the id
    waits_for: tuple[str, ...] = ()

    @property
    def after(self) -> tuple[str, ...]:
        """Every run this one is scheduled after."""
        return self.depends_on + tuple(w for w in self.waits_for if w not in self.depends_on)


# what only evaluates: settings that never change the trained weights (no method reads them while training)
EVALUATION_SECTIONS = ("eval", "probe")
EVALUATION_KEYS = {"data": ("test_split", "test_limit")}


def training_config(hashed: dict) -> dict:
    """`hashable_config(cfg)` without its evaluation settings: what the training key hashes."""
    out = {k: v for k, v in hashed.items() if k not in EVALUATION_SECTIONS}
    for section, keys in EVALUATION_KEYS.items():
        if section in out:
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    return out


def make_train_key(hashed: dict, seed: int, starts_from: tuple[str, ...] = (), ranks: int = 1) -> str:
    """12 hex digits of sha256(training config, seed[, the training keys of the runs it builds on][, the ranks it
    trains on]): the same config on another number of ranks is another training (per-rank BatchNorm statistics,
    per-rank draws), though its run id, which predates training keys, does not say so."""
    key: dict = {"train": training_config(hashed), "seed": seed}
    if starts_from:
        key["after"] = list(starts_from)
    if ranks > 1:
        key["ranks"] = ranks
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def make_run_id(cfg: RunConfig, seed: int, depends_on: tuple[str, ...] = (), *, hashed: dict | None = None) -> str:
    """12 hex digits of sha256(config, seed[, the runs it builds on]); a run without dependencies
    keeps the id it had before dependencies existed. `hashed`: `hashable_config(cfg)` if already at hand."""
    key: dict = {"config": hashable_config(cfg) if hashed is None else hashed, "seed": seed}
    if depends_on:
        key["after"] = list(depends_on)
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def member_seeds(row_deps: tuple[str, ...], seeds: list[int], seed: int) -> list[tuple[str, int]]:
    """(row, seed) of each dependency of a row's run with `seed`: the same seed, except that the
    k-th repeat of a label takes the seed k places further along the seed list (cyclic)."""
    out, seen = [], {}
    for label in row_deps:
        k = seen.get(label, 0)
        seen[label] = k + 1
        if k >= len(seeds):
            raise ValueError(f"the ensemble uses row {label!r} {k + 1} times but the profile has only {len(seeds)} "
                             f"seed(s) {seeds}: each repeat needs its own seed")
        out.append((label, seeds[(seeds.index(seed) + k) % len(seeds)]))
    return out


def plan_runs(table: Table, profile: str, rows: list[str] | None = None, precision: str | None = None) -> list[Run]:
    """Every implemented row x seed of a table under one profile, in table order. Selecting rows
    also brings in the runs they build on (bases first). `precision` (default: $SEMCL_PRECISION, which
    `semcl --precision` sets; unset = official) is part of every run's config and id."""
    from semcl.runtime.precision import planned, stored

    precision = stored(precision) if precision is not None else planned()
    seeds = table.seeds_for(profile)
    made: dict[tuple[str, int], Run] = {}
    by_row: dict[str, tuple[RunConfig, dict]] = {}  # a row's config (and its hashed part) is the same for every seed
    ranks = {r.label: max(res.gpus, res.tasks) for r in table.rows
             for res in [table.resources_for(r.label, profile)]} if profile in table.profiles else {}

    def make(label: str, seed: int) -> Run:
        if (label, seed) not in made:
            row = table.row(label)
            if label not in by_row:
                resolved = table.resolve(row, profile)
                if precision is not None:
                    resolved.optim.precision = precision
                by_row[label] = (resolved, hashable_config(resolved))
            cfg, hashed = by_row[label]
            bases = [make(d, s) for d, s in member_seeds(row.depends_on, seeds, seed)]
            deps = tuple(b.run_id for b in bases)
            # the seeds of a row share one config object: run configs are read-only
            made[(label, seed)] = Run(table.id, label, seed, profile, cfg, make_run_id(cfg, seed, deps, hashed=hashed),
                                      deps, make_train_key(hashed, seed, tuple(b.train_key for b in bases), ranks.get(label, 1)))
        return made[(label, seed)]

    # a `select` row has no runs: it shows a row of another table; a derived row computes from others; a
    # reference row shows another source's number
    wanted = [r for r in table.rows
              if r.implemented and not r.select and not r.derived and not r.reference and (not rows or r.label in rows)]
    for row in wanted:
        for seed in seeds:
            make(row.label, seed)
    order = {r.label: i for i, r in enumerate(table.rows)}
    return sorted(made.values(), key=lambda r: (order[r.row_label], seeds.index(r.seed)))


def waves(runs: list[Run]) -> list[list[Run]]:
    """Runs in dependency order: wave 0 needs nothing from `runs`, wave k only earlier waves."""
    ids = {r.run_id for r in runs}
    depth: dict[str, int] = {}
    by_id = {r.run_id: r for r in runs}

    def level(rid: str) -> int:
        if rid not in depth:
            depth[rid] = 1 + max((level(d) for d in by_id[rid].after if d in ids), default=-1)
        return depth[rid]

    out: list[list[Run]] = []
    for run in runs:
        k = level(run.run_id)
        out.extend([] for _ in range(k + 1 - len(out)))
        out[k].append(run)
    return out


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

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def folder(self, run_id: str) -> RunFolder:
        """The run's folder, whose files RunFolder names (semcl.run_folder)."""
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
        return self.root / TRAININGS / f"{train_key}.json"

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
