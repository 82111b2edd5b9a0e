"""What `semcl list / show / plan --format json` print, and `show --rows REGEX`'s row filter.

The JSON is for scripts: every object of one kind has the same keys (a value that does not apply is
null or empty, never a missing key), and numbers are numbers (a plan's cost as `cost` with its `unit`).
`list` and `plan` build it from the registry index (semcl.registry.index) and import only the standard library.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from semcl.store.run_folder import RunFolder


def dump(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def matching_rows(table, pattern: str) -> list:
    """The rows whose label matches `pattern` (a regular expression, searched, case-insensitive)."""
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as err:
        from semcl.errors import ConfigError

        raise ConfigError(f"--rows {pattern!r}: not a regular expression ({err})") from None
    rows = [r for r in table.rows if regex.search(r.label)]
    if not rows:
        from semcl.errors import ConfigError

        raise ConfigError(f"--rows {pattern!r}: no row label of {table.id} matches ({len(table.rows)} rows; "
                          f"`semcl show {table.id}` lists them)")
    return rows


def _started(runs_dir: Path) -> set[str]:
    try:
        return set(os.listdir(runs_dir))  # one directory read instead of a stat per planned run
    except OSError:
        return set()


def list_json(index: dict, paper: str | None, profile: str, runs_dir: Path) -> dict:
    """{profile, tables: [{id, paper, source, title, profiles, rows, implemented, runs_planned, runs_done}],
    skipped: [ids without the profile]} (`semcl list --format json`)."""
    started = _started(runs_dir)
    tables, skipped = [], []
    for t in index["tables"]:
        if paper and t["paper"] != paper:
            continue
        if t["id"] not in index["runs"]:
            skipped.append(t["id"])
            continue
        runs = index["runs"][t["id"]]
        done = sum(r[0] in started and RunFolder(runs_dir / r[0]).metrics.exists() for r in runs)
        tables.append({"id": t["id"], "paper": t["paper"], "source": t["source"], "title": t["title"],
                       "profiles": list(t["profiles"]), "rows": t["rows"], "implemented": t["implemented"],
                       "runs_planned": len(runs), "runs_done": done})
    return {"profile": profile, "tables": tables, "skipped": sorted(skipped)}


def _reported(rep) -> dict | None:
    if rep is None:
        return None
    return {"value": rep.value, "std": rep.std, "provenance": rep.provenance, "source": rep.source,
            "also": [_reported(a) for a in rep.also], "overrides": _reported(rep.overrides),
            "same_as": rep.same_as}  # overrides: semcl numbers --force


def show_json(table, rows: list) -> dict:
    """The registry entry of `semcl show`, rows limited to `rows` (`--rows`)."""
    from semcl.evals.protocols import describe

    labels = {r.label for r in rows}
    return {
        "id": table.id, "paper": table.paper, "source": table.source, "title": table.title, "path": str(table.path),
        "seeds": list(table.seeds),
        "columns": [{**dataclasses.asdict(c), "protocol": describe(c)} for c in table.columns],
        "rows": [{"label": r.label, "method": r.method, "state": r.state, "implemented": r.implemented,
                  "overrides": r.overrides, "init_from": r.init_from, "teacher": r.teacher,
                  "ensemble": list(r.ensemble),
                  "select": dataclasses.asdict(r.select) if r.select else None,
                  "derived": [list(p) for p in r.derived],
                  "reported": {k: _reported(v) for k, v in r.reported.items()}} for r in rows],
        "profiles": {name: {"seeds": table.seeds_for(name), "note": p.note, "overrides": p.overrides,
                            "substitute": p.substitute,
                            "rows": {k: v for k, v in p.rows.items() if k in labels}}
                     for name, p in table.profiles.items()},
        "deviations": list(table.deviations), "notes": list(table.notes),
    }


def files_json(table, trails: list) -> dict:
    """{id, path, rows: [trail_json of each semcl.report.trail.RowTrail]} (`semcl show --files --format json`)."""
    return {"id": table.id, "path": str(table.path), "rows": [trail_json(t) for t in trails]}


def ref_json(ref) -> dict | None:
    """A semcl.report.trail.Ref as JSON (None stays null)."""
    if ref is None:
        return None
    return {"role": ref.role, "file": ref.shown, "path": str(ref.path), "module": ref.module, "name": ref.name,
            "note": ref.note}


def trail_json(trail) -> dict:
    """One semcl.report.trail.RowTrail for `semcl show --files --format json` (every key always present)."""
    return {"label": trail.label, "method": trail.method, "state": trail.state, "note": trail.note,
            "files": [ref_json(r) for r in trail.refs],
            "columns": [{"key": c.key, "eval": c.eval, "protocol": ref_json(c.protocol),
                         "metrics": [ref_json(m) for m in c.metrics]} for c in trail.columns],
            "sources": [trail_json(s) for s in trail.sources], "selects": trail.selects,
            "files_to_a_cell": trail.files_to_a_cell()}


def plan_json(index: dict, tables: list[dict], profile: str, runs_dir: Path, store_factory) -> dict:
    """{profile, unit, tables: [{id, runs: [{id, row, seed, profile, cost, status, after}], not_implemented,
    total}], total} (`semcl plan --format json`); the overall total counts a run two tables share once.
    A run's status is read from the store only where its folder exists (else `missing`)."""
    unit = "GPU-h" if profile == "paper" else "CPU-min"
    store = None
    seen: dict[str, tuple[float, bool]] = {}  # run id -> (cost, done) over all tables
    out = []
    for table in tables:
        runs = []
        for run_id, label, seed, cost, deps, *held in index["runs"][table["id"]]:
            status = "missing"
            if (runs_dir / run_id).exists():
                store = store or store_factory()
                status = store.status(run_id)[0]
            amount = float(cost.split()[0])
            seen[run_id] = (amount, status == "done")
            runs.append({"id": run_id, "row": label, "seed": seed, "profile": profile, "cost": amount,
                         "status": status, "after": list(deps), "gpus": held[0] if held else None,
                         "train_key": held[1] if len(held) > 1 else None})
        out.append({"id": table["id"], "runs": runs, "not_implemented": list(table["not_implemented"]),
                    "total": _total(runs)})
    everything = [{"cost": c, "status": "done" if d else "missing"} for c, d in seen.values()]
    return {"profile": profile, "unit": unit, "tables": out, "total": {"tables": len(out), **_total(everything)}}


def _total(runs: list[dict]) -> dict:
    left = [r for r in runs if r["status"] != "done"]
    return {"runs": len(runs), "cost": round(sum(r["cost"] for r in runs), 6),
            "not_done_runs": len(left), "not_done_cost": round(sum(r["cost"] for r in left), 6)}
