"""semcl from Python (a notebook, a script): the registry's tables, a table's plan, its runs' values as the long
pandas frame, a run's record and its per-epoch history. Each function is a thin door to the code the CLI runs
(`semcl show / plan / table / status`), never a second copy of it, so both always agree.

    from semcl import api
    api.plan("rince/tab2", "smoke")              # run ids, rows, seeds, cost estimates, status
    long = api.long_frame("rince/tab2", "smoke")  # table, row, column, seed, value, run_id, source
    long.groupby(["row", "column"])["value"].agg(["mean", "std", "count"])
    api.history(long.run_id.iloc[0])             # epoch, loss, lr, seconds ...

`sets` (a list of "key=value" texts, as `--set`; "key=a,b" a sweep) and `rows` (as `--row`: only these rows vary)
give a table's variant rows beside its registered ones, with their own run ids, as `semcl table --set` shows them.

`against` (a list of "[NAME=]PATH" texts, as `--against`): another lab's results roots or bundles, read only,
beside yours; `long_frame` then has an `origin` column ("ours", then each NAME) and `summary` compares per cell
(semcl.report.against: both sides' mean ± std (n), Welch's p, consistent / differs / n too small).

`results` is a results folder (default: $SEMCL_RESULTS, else ./results); the registry is $SEMCL_REGISTRY, else the
installed package's copy, else the clone's experiments/ (semcl.locations). Errors are semcl.errors.SemclError.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PLAN_COLUMNS = ["id", "row", "seed", "profile", "cost", "status", "after"]  # at least; `semcl plan` may add more


def _store(results: str | Path | None):
    from semcl.store import Store

    return Store(Path(results) if results else None)


def _listed(texts) -> list[str] | None:
    """`sets` / `rows` as a list (one text alone is one item, not its characters); None when empty."""
    return ([texts] if isinstance(texts, str) else list(texts)) if texts else None


def table_ids(paper: str | None = None) -> list[str]:
    """The registry's table ids (of one paper), sorted, as `semcl list` shows them."""
    from semcl.registry.tables import load_registry

    return sorted(t.id for t in load_registry().values() if paper is None or t.paper == paper)


def table(table_id: str, profile: str = "paper", sets: list[str] | None = None, rows: list[str] | None = None):
    """The registry entry (semcl.registry.tables.Table: rows, columns, profiles, reported numbers), as `semcl show`
    reads it; with `sets`: each varied row followed by its variant(s) under `profile` (semcl.registry.variant_rows)."""
    from semcl.registry.tables import get_table

    entry = get_table(table_id)
    sets, rows = _listed(sets), _listed(rows)
    if not sets and not rows:
        return entry
    from semcl.registry.variant_rows import table_view

    return table_view(entry, sets, rows, profile)


def runs(table_id: str, profile: str = "paper", sets: list[str] | None = None, rows: list[str] | None = None) -> list:
    """The planned runs (semcl.registry.plan.Run: run_id, row_label, seed, the resolved config), in plan order; with
    `sets`, the variants' runs beside the registered rows' (`table`)."""
    from semcl.registry.plan import plan_runs

    return plan_runs(table(table_id, profile, sets, rows), profile)


def plan(table_id: str, profile: str = "paper", results: str | Path | None = None, sets: list[str] | None = None,
         rows: list[str] | None = None) -> pd.DataFrame:
    """One line per planned run: id, row, seed, profile, cost (GPU-h for `paper`, else CPU-min), status, after
    (the runs it waits for); what `semcl plan <table> --format json` lists (with `sets`: `plan --set`, the
    variants' runs and the registered runs they build on)."""
    from semcl.cli.format import plan_json
    from semcl.registry.index import load_index

    if sets or rows:
        from semcl.registry.variant_rows import plan_index, variant_tables

        index = plan_index(variant_tables([table(table_id)], _listed(sets), _listed(rows), profile), profile)
    else:
        index = load_index(profile)
    meta = [t for t in index["tables"] if t["id"] == table_id]
    if not meta:
        table(table_id)  # the registry's own error for an unknown id
    if table_id not in index["runs"]:
        from semcl.errors import ConfigError

        raise ConfigError(f"{table(table_id).path}: table {table_id!r} has no profile {profile!r}")
    store = _store(results)
    planned = plan_json(index, meta, profile, store.folders.runs, lambda: store)["tables"][0]["runs"]
    return pd.DataFrame(planned) if planned else pd.DataFrame(columns=PLAN_COLUMNS)  # every key the CLI prints


def _origins(against, results):
    from semcl.report.origins import open_origins

    return open_origins(_listed(against), _store(results).root)


def long_frame(table_id: str, profile: str = "paper", results: str | Path | None = None,
               sets: list[str] | None = None, rows: list[str] | None = None, against=None) -> pd.DataFrame:
    """Every finished value of the table: one line per (row, column, seed) with table, row, column, seed, value,
    run_id, source (semcl.report.tables.long_table, the frame `semcl table` renders; with `sets`, its variants too;
    with `against`, an `origin` column first and each origin's lines)."""
    from semcl.report.tables import long_table

    entry = table(table_id, profile, sets, rows)
    if against:
        from semcl.report.origins import long_with_origins

        return long_with_origins(entry, profile, _store(results), _origins(against, results))
    return long_table(entry, profile, _store(results))


def summary(table_id: str, profile: str = "paper", results: str | Path | None = None,
            numbers: str | Path | None = None, sets: list[str] | None = None,
            rows: list[str] | None = None, against=None) -> pd.DataFrame:
    """Per row and column: ours (mean, sample std, n) beside the paper's value, as `semcl table` shows them,
    with the user's paper numbers (`numbers`: the overlay file; default $SEMCL_NUMBERS, else
    <results>/numbers.yaml, as the CLI reads it); a number the overlay cannot show is a warning. With `sets`:
    each varied row followed by its variant(s), as `semcl table --set`. With `against`: the per-cell comparison of
    `semcl table --against` instead (origin, row, column, paper, mean, std, n, p, verdict)."""
    import warnings

    from semcl.report import tables as report
    from semcl.report.user_numbers import Overlay, overlay_path

    store = _store(results)
    overlay = Overlay(overlay_path(str(numbers) if numbers else None, store.root))
    entry = overlay.apply(table(table_id, profile, sets, rows))
    for line in overlay.warnings:
        warnings.warn(line, stacklevel=2)
    if against:
        from semcl.report.against import compare
        from semcl.report.origins import long_with_origins, names

        origins = _origins(against, results)
        return compare(entry, profile, long_with_origins(entry, profile, store, origins), names(origins))
    return report.summary(entry, profile, report.long_table(entry, profile, store))


def claims(paper: str, profile: str = "paper", results: str | Path | None = None, against=None) -> pd.DataFrame:
    """Each claim of experiments/<paper>/claims.yaml judged on each origin's runs (`semcl claims --against`): one
    line per (claim, origin) with id, origin, verdict, diff, p and `agrees` (the origin's verdict equals ours)."""
    from semcl.report.against_claims import claims_frame, judge_origins

    return claims_frame(judge_origins(paper, profile, _store(results), _origins(against, results)))


def status(run_id: str, results: str | Path | None = None) -> tuple[str, str]:
    """(status, detail) of one run: done / running / partial / failed / missing, as `semcl status` reports it."""
    return _store(results).status(run_id)


def record(run_id: str, results: str | Path | None = None) -> dict | None:
    """A finished run's record (metrics, config, seed, git commit, versions, device, wall time, history);
    None while it has not finished; ResultsError when its metrics.json is unreadable."""
    return _store(results).read_record(run_id)


def history(run_id: str, results: str | Path | None = None) -> pd.DataFrame:
    """A run's per-epoch history (epoch, loss, lr, seconds, ...): the `history.jsonl` the run appends to while it
    trains (semcl.runtime.history, a torn last line left out), else the finished record's `history`; empty when
    the run has neither yet."""
    from semcl.runtime.history import HISTORY_FILE, read_history

    store = _store(results)
    path = store.run_dir(run_id) / HISTORY_FILE
    if path.exists():
        return pd.DataFrame(read_history(path))
    rec = store.read_record(run_id)
    return pd.DataFrame((rec.get("history") or []) if rec else [])


def load_released(table_id: str, row_label: str, path: str | Path, profile: str = "paper"):
    """The released row's network (the authors' checkpoint `path`, read by its layout's strict converter:
    semcl.models.released) in eval mode, as `semcl weights check` loads it; SemclError in one line when the file
    is not that network (the first offending keys named) or cannot be read safely."""
    from semcl.engine.released import load_released as load

    return load(table_id, row_label, path, profile)
