"""`semcl results import`: every line of a results CSV checked against the registry and the store, then written as
records (semcl.report.imported) -- all of them or, when any line is wrong, none.

A line is refused (one line naming the file and line) when its table, row, column or seed does not exist; the row
has no runs of its own (a reference, derived or `select` row); the column's number is not a run's (a gain, a
reported or a features column); the value is not a finite number within the column's range
(semcl.evals.protocols.value_bounds: percentages 0-100); the file names the cell twice; the store already holds an
imported value for the cell (unless `replace`); or one of semcl's own runs measured that very cell (the two would
mix in one mean).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path

from semcl.errors import ConfigError, SemclError
from semcl.files import sha256_file, write_json_atomic
from semcl.report.imported import NOT_IMPORTABLE, ImportedResult, read_csv, record_path, set_aside
from semcl.report.user_numbers import plain_text


def _cell(table, fields: dict[str, str], profile: str, where: str) -> tuple[str, str, int, float]:
    """(row, column key, seed, value) of one CSV line, checked against `table`."""
    from semcl.evals.protocols import value_bounds

    row = fields["row"]
    labels = [r.label for r in table.rows]
    if row not in labels:
        raise ConfigError(f"{where}: table {table.id} has no row {row!r} (see `semcl show {table.id}`)")
    r = table.row(row)
    if r.reference or r.derived or r.select:
        kind = "a reference" if r.reference else "a derived" if r.derived else "a `select`"
        raise ConfigError(f"{where}: row {row!r} of {table.id} is {kind} row, with no runs of its own to import")
    column = next((c for c in table.columns if fields["column"] in (c.key, c.label)), None)
    if column is None:
        raise ConfigError(f"{where}: table {table.id} has no column {fields['column']!r} "
                          f"(columns: {', '.join(c.key for c in table.columns)})")
    if column.eval in NOT_IMPORTABLE:
        raise ConfigError(f"{where}: column {column.key!r} of {table.id} (eval {column.eval}) holds no run's number")
    try:
        seed = int(fields["seed"])
    except ValueError:
        raise ConfigError(f"{where}: key 'seed' = {fields['seed']!r} is not a whole number") from None
    seeds = table.seeds_for(profile)
    if seed not in seeds:
        raise ConfigError(f"{where}: seed {seed} is not a seed of {table.id} in profile {profile} "
                          f"({', '.join(map(str, seeds))}; `--seeds` names others)")
    try:
        value = float(fields["value"])
    except ValueError:
        raise ConfigError(f"{where}: key 'value' = {fields['value']!r} is not a number") from None
    bounds = value_bounds(column) or (float("-inf"), float("inf"))
    if not bounds[0] <= value <= bounds[1]:  # also refuses nan; inf only where the range has no end
        raise ConfigError(f"{where}: key 'value' = {fields['value']} is outside [{bounds[0]:g}, {bounds[1]:g}], "
                          f"the range of {table.id} column {column.key!r} ({column.eval})")
    if value in (float("inf"), float("-inf")):
        raise ConfigError(f"{where}: key 'value' = {fields['value']} is not a finite number")
    return row, column.key, seed, value


def stage(path: Path, get_table: Callable, profile: str, root: Path, measured: Callable, *,
          replace: bool = False) -> list[ImportedResult]:
    """The records a results CSV would write, every line checked (module docstring); nothing is written.
    `get_table(id)` gives a registry table (ConfigError for an unknown one); `measured(table, row, column, seed)` the
    run id of semcl's own finished run holding that cell, or None."""
    digest = sha256_file(path)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    staged: list[ImportedResult] = []
    seen: dict[tuple, int] = {}
    for line, fields in read_csv(path):
        where = f"{path}: line {line}"
        for key in ("table", "row", "column", "seed", "value", "source"):
            if not fields[key]:
                raise ConfigError(f"{where}: key {key!r} is empty")
        plain_text(fields["source"], where, "source")
        try:
            table = get_table(fields["table"])
        except SemclError:
            raise ConfigError(f"{where}: no table {fields['table']!r} in the registry (see `semcl list`)") from None
        if profile not in table.profiles:
            raise ConfigError(f"{where}: table {table.id} has no profile {profile!r} (has: {', '.join(table.profiles)})")
        row, column, seed, value = _cell(table, fields, profile, where)
        rec = ImportedResult(table.id, row, column, seed, profile, value, fields["source"], str(path), digest, now)
        if rec.cell in seen:
            raise ConfigError(f"{where}: a second value for {table.id} row {row!r} column {column!r} seed {seed} "
                              f"(first on line {seen[rec.cell]})")
        seen[rec.cell] = line
        if record_path(root, rec.cell).exists() and not replace:
            raise ConfigError(f"{where}: {table.id} row {row!r} column {column!r} seed {seed} ({profile}) was "
                              "imported before; pass --replace to set the old record aside and take this one")
        run_id = measured(table, row, column, seed)
        if run_id is not None:
            raise ConfigError(f"{where}: {table.id} row {row!r} column {column!r} seed {seed} ({profile}) is "
                              f"measured by semcl's own run {run_id}; an imported value would mix with it")
        staged.append(rec)
    return staged


def commit(staged: list[ImportedResult], root: Path) -> list[str]:
    """Write the staged records (an existing record of a cell is set aside first); the lines saying what happened."""
    said = []
    for rec in staged:
        path = record_path(root, rec.cell)
        verb = "imported"
        if path.exists():
            set_aside(path)
            verb = "replaced"
        write_json_atomic(path, dataclasses.asdict(rec))
        said.append(f"{verb}: {rec.describe()}")
    return said


def run_measured(store, profile: str) -> Callable:
    """`measured(table, row, column, seed)` for `stage`: the id of semcl's own finished run of that row and seed
    whose record holds the column's number in this profile, else None."""
    from semcl.evals.protocols import metric_key
    from semcl.registry.plan import plan_runs

    runs: dict[str, dict] = {}

    def measured(table, row: str, column: str, seed: int) -> str | None:
        if table.id not in runs:
            runs[table.id] = {(r.row_label, r.seed): r.run_id for r in plan_runs(table, profile)}
        run_id = runs[table.id].get((row, seed))
        col = next(c for c in table.columns if c.key == column)
        key = metric_key(col, table.profile(profile).substitute)
        rec = store.read_record(run_id) if run_id is not None and key is not None else None
        return run_id if rec is not None and rec["metrics"].get(key) is not None else None

    return measured
