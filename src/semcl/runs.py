"""Runs, their ids, and the results store (results/runs/<run_id>/).

A Run is (table, row, seed, profile) with its resolved config. The id hashes the config's
result-defining part and the seed, so the same run always lands in the same folder, a rerun
is skipped, and a changed config is a new run. The store never overwrites a finished or
unreadable record.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semcl.catalog import BACKBONE_GFLOPS, DATASETS
from semcl.config import RunConfig, hashable_config
from semcl.errors import ResultsError
from semcl.registry import Table

STATUSES = ("done", "partial", "failed", "missing")
# Assumed sustained throughput for the rough cost estimate (fwd+bwd FLOP/s).
GPU_FLOPS = 20e12  # an A100-class GPU on a CIFAR ResNet-50 (~5,000 images/s)
CPU_FLOPS = 5e10  # one core of this class of machine on a small ResNet


@dataclass(frozen=True)
class Run:
    table_id: str
    row_label: str
    seed: int
    profile: str
    config: RunConfig
    run_id: str


def make_run_id(cfg: RunConfig, seed: int) -> str:
    blob = json.dumps({"config": hashable_config(cfg), "seed": seed}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def plan_runs(table: Table, profile: str, rows: list[str] | None = None) -> list[Run]:
    """Every implemented row x seed of a table under one profile, in table order."""
    runs = []
    for row in table.rows:
        if not row.implemented or (rows and row.label not in rows):
            continue
        cfg = table.resolve(row, profile)
        for seed in table.seeds_for(profile):
            runs.append(Run(table.id, row.label, seed, profile, cfg, make_run_id(cfg, seed)))
    return runs


def estimate_cost(cfg: RunConfig, profile: str) -> str:
    """Rough compute estimate: GPU-hours for the paper profile, CPU-minutes otherwise."""
    info = DATASETS.get(cfg.data.name)
    n_train = info.num_train if info else 50_000
    if cfg.data.train_per_class and info:
        n_train = min(n_train, cfg.data.train_per_class * info.num_classes)
    if cfg.data.synthetic:
        n_train = cfg.data.synthetic_train_per_class * (info.num_classes if info else 100)
    imb = getattr(cfg.data, "imbalance_factor", None)
    if imb and info:  # the long-tailed cut n_i = int(n_max * IF**(-i / (C - 1)))
        n_max = getattr(cfg.data, "lt_max_per_class", None) or n_train // info.num_classes
        c = info.num_classes
        n_train = sum(int(n_max * imb ** (-i / (c - 1))) for i in range(c))
    per_image = BACKBONE_GFLOPS.get(cfg.model.backbone, 10.0) * 1e9
    # one fwd+bwd per view; momentum methods add a key forward (a third of a step)
    factor = 1.0 if cfg.method.name in ("ce", "ce_sa") else 4 / 3
    train = cfg.schedule.epochs * n_train * per_image * factor
    probe_passes = cfg.probe.epochs if cfg.probe.augment else 1
    probe = probe_passes * n_train * per_image / 3 if cfg.eval.linear_probe else 0.0
    flops = train + probe
    if profile == "paper":
        return f"{flops / GPU_FLOPS / 3600:.2g} GPU-h"
    return f"{flops / CPU_FLOPS / 60:.2g} CPU-min"


def results_root() -> Path:
    return Path(os.environ.get("SEMCL_RESULTS", "results"))


def write_json_atomic(path: Path, obj: Any) -> None:
    """Temp file in the same folder + rename: readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """The results store: one folder per run id."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root else results_root()

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def metrics_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "metrics.json"

    def read_record(self, run_id: str) -> dict | None:
        """The finished record, None if absent; ResultsError if present but unreadable."""
        path = self.metrics_path(run_id)
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ResultsError(f"{path}: truncated or invalid JSON ({err}); move the file away to rerun this run") from None
        if not isinstance(record, dict) or not isinstance(record.get("metrics"), dict):
            raise ResultsError(f"{path}: key 'metrics' missing or not a mapping; move the file away to rerun this run")
        if record.get("run_id") != run_id:
            raise ResultsError(f"{path}: key 'run_id' is {record.get('run_id')!r}, expected {run_id!r}")
        return record

    def status(self, run_id: str) -> tuple[str, str]:
        """(status, detail): done / partial / failed / missing."""
        try:
            if self.read_record(run_id) is not None:
                return "done", ""
        except ResultsError as err:
            return "failed", str(err)
        folder = self.run_dir(run_id)
        failed = folder / "failed.json"
        if failed.exists():
            try:
                info = json.loads(failed.read_text())
                return "failed", f"{info.get('error', '?')} (log: {folder / 'log.txt'})"
            except json.JSONDecodeError:
                return "failed", f"see {folder / 'log.txt'}"
        if (folder / "checkpoints" / "last.pt").exists():
            return "partial", "checkpoint present"
        return "missing", ""

    def records(self, run_ids: list[str]) -> dict[str, dict]:
        """Finished records of these runs (absent ones skipped; unreadable ones raise)."""
        out = {}
        for rid in run_ids:
            rec = self.read_record(rid)
            if rec is not None:
                out[rid] = rec
        return out
