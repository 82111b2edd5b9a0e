"""Reported cells that show another entry's number: `{same_as: "<table id>/<row label>/<column key>"}`.

A paper number the registry holds once (e.g. the README's PaCo ImageNet-LT top-1 in paco/imagenet-lt)
may belong in a second table too (GPaCo Table II). Copying it would give the number two sources that can
drift apart; a reference keeps one. The reference is checked and resolved when the registry is loaded:
the cell then carries the target's value, provenance, source and std, and `Reported.same_as` names the
target so tables and `semcl show` can say where the number lives.

Rules: the target cell must hold a number (not null) and must not itself be a reference (one level, so
every number has exactly one place where it is written). Table ids and row labels may hold '/', column
keys may not: the table is the longest known id the text starts with, the column is the last part and
the row label is what lies between.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from semcl.errors import ConfigError

KEY = "same_as"
FORM = "'<table id>/<row label>/<column key>'"


@dataclass(frozen=True)
class CellRef:
    """One `same_as` cell of a row: the column it fills, the reference text and the YAML key (for errors)."""

    column: str
    text: str
    key: str


def parse(value: dict, column: str, key: str, where: str) -> CellRef:
    """`{same_as: "..."}` as written: the only key, a text of at least three non-empty '/' parts."""
    extra = sorted(set(value) - {KEY})
    if extra:
        raise ConfigError(f"{where}: '{key}': a same_as cell has no other key ({extra[0]!r}); the number, "
                          "provenance and source are the target's")
    text = value[KEY]
    if not isinstance(text, str) or len(text.split("/")) < 4 or not all(text.split("/")):
        raise ConfigError(f"{where}: '{key}.{KEY}' = {text!r} is not {FORM}")
    return CellRef(column, text, f"{key}.{KEY}")


def split(text: str, table_ids) -> tuple[str, str, str] | None:
    """(table id, row label, column key) of a reference, or None when no known table id starts it."""
    parts = text.split("/")
    for cut in range(len(parts) - 2, 0, -1):  # the longest table id first
        table = "/".join(parts[:cut])
        if table in table_ids:
            return table, "/".join(parts[cut:-1]), parts[-1]
    return None


def targets(refs, table_ids) -> set[str]:
    """The table ids a table's references read (unknown ones are left to `resolve` to report)."""
    found = (split(r.text, table_ids) for r in refs)
    return {f[0] for f in found if f is not None}


def resolve(table: Any, tables: dict[str, Any]) -> Any:
    """`table` with every `same_as` cell replaced by its target's Reported (its `same_as` set to the text);
    a reference to no table, row, column or number is one ConfigError naming the file and key."""
    if not any(row.refs for row in table.rows):
        return table
    rows = []
    for row in table.rows:
        reported = dict(row.reported)
        for ref in row.refs:
            reported[ref.column] = dataclasses.replace(_target(ref, table, tables), same_as=ref.text)
        rows.append(dataclasses.replace(row, reported=reported))
    return dataclasses.replace(table, rows=rows)


def _target(ref: CellRef, table: Any, tables: dict[str, Any]) -> Any:
    bad = f"{table.path}: '{ref.key}' = {ref.text!r}"
    found = split(ref.text, tables)
    if found is None:
        raise ConfigError(f"{bad}: no table of the registry is named by its start ({FORM})")
    tid, label, column = found
    src = tables[tid]
    row = next((r for r in src.rows if r.label == label), None)
    if row is None:
        raise ConfigError(f"{bad}: {tid} has no row {label!r}")
    if column not in [c.key for c in src.columns]:
        raise ConfigError(f"{bad}: {tid} has no column {column!r}")
    if any(r.column == column for r in row.refs):
        raise ConfigError(f"{bad}: that cell is itself a same_as reference; name the cell that holds the number")
    rep = row.reported.get(column)
    if rep is None:
        raise ConfigError(f"{bad}: that cell holds no reported number (null)")
    return rep
