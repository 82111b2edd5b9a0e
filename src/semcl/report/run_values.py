"""The per-seed values a tracked page shows, kept beside it so a test can hold the page to the code.

`semcl readme` keeps the README block's runs in reproduce/README.runs.json and `semcl report --runs-file` a paper
page's runs in reproduce/<paper>.<profile>.runs.json: one entry per (table, row, seed) with a finished record,
holding what the pages read of that record (its metrics, the code commit, the environment fields that mark a
mixed cell, the world size, when it finished) and what retraining it bit for bit needs (cpu_isa, mkl_cbwr).
`store_of` writes the entries back as a results store, which renders the page again without the run folders.
"""

from __future__ import annotations

import re
from pathlib import Path

from semcl.files import write_json_atomic
from semcl.store import Store


def run_values(run, rec: dict) -> dict:
    """One entry: the planned run (its table's view: table, profile, row, seed, run id) and its finished record."""
    git = rec.get("git") if isinstance(rec.get("git"), dict) else {}
    return {"table": run.table_id, "profile": run.profile, "row": run.row_label, "seed": run.seed,
            "run_id": run.run_id, "commit": git.get("commit"), "dirty": git.get("dirty"),
            "cpu_isa": rec.get("cpu_isa"), "mkl_cbwr": rec.get("mkl_cbwr"),
            "environment": rec.get("environment"), "world_size": rec.get("world_size"),
            "finished_at": rec.get("finished_at"), "metrics": rec["metrics"]}


def table_values(table, profile: str, store: Store, rows: str | None = None) -> list[dict]:
    """The entries of the table's finished runs, in plan order; `rows`: only the rows whose label matches it."""
    from semcl.registry.plan import plan_runs

    keep = re.compile(rows) if rows else None
    out = []
    for run in plan_runs(table, profile):
        rec = store.read_record(run.run_id) if keep is None or keep.search(run.row_label) else None
        if rec is not None:
            out.append(run_values(run, rec))
    return out


def record_of(entry: dict) -> dict:
    """The metrics.json record an entry stands for, as far as the pages read it."""
    return {"run_id": entry["run_id"], "table": entry["table"], "row": entry["row"], "seed": entry["seed"],
            "profile": entry["profile"], "metrics": entry["metrics"],
            "git": {"commit": entry.get("commit"), "dirty": entry.get("dirty")},
            "environment": entry.get("environment"), "world_size": entry.get("world_size"),
            "finished_at": entry.get("finished_at"), "cpu_isa": entry.get("cpu_isa"),
            "mkl_cbwr": entry.get("mkl_cbwr")}


def store_of(entries: list[dict], root: Path) -> Store:
    """A results store at `root` (new) holding one finished record per run id of `entries`."""
    store = Store(root)
    for entry in {e["run_id"]: e for e in entries}.values():
        write_json_atomic(store.metrics_path(entry["run_id"]), record_of(entry))
    return store


def newest_finish(entries: list[dict]) -> str | None:
    """The date (YYYY-MM-DD) the newest of the runs finished: what a page names instead of when it was built."""
    done = [e["finished_at"] for e in entries if isinstance(e.get("finished_at"), str)]
    return max(done)[:10] if done else None


def write_runs_file(path: Path, page: str, runs: list[dict]) -> None:
    write_json_atomic(path, {"page": page, "runs": runs})
