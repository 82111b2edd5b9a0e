"""Variants from the command line: `--set key=value` on `plan`, `run`, `check`, `status`, `table`, `curves` and
`figure` (`claims`, `report`, `export`: semcl.registry.variant_views);
`--set key=a,b` (or the key repeated) makes one variant per value, two swept keys their grid
(semcl.registry.set_options reads the texts).

A variant is a registered row with extra dotted config keys (the names rows' `overrides` use, e.g.
`optim.lr`) applied after every registry layer (preset -> row -> profile -> the profile's row entry),
so the value given is the value run, and it passes the checks a registered row passes (the schema and the
method's own dataset check, MethodSpec.check_dataset). It is a row of its own, labelled "<label> [key=value, ...]":
its config differs, so its run ids differ, and the registered row, its runs and its records stay as
they were. Keys and values go through the strict schema (semcl.config) before anything is planned.

Which rows vary: the `--row` labels, else every row that runs. A `method.*` key applies to the rows
whose method has that field (as a profile's `method.*` keys do); a row that builds on a varied row
(init_from / teacher / ensemble) builds on the variant and is a variant too.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from semcl.config import hashable_config
from semcl.errors import ConfigError
from semcl.registry.set_options import method_fields, parse_grid, parse_value, settings_text, slug, sweep_text
from semcl.run_config import build_config

__all__ = ["parse_value", "plan_index", "slug", "table_view", "variant_tables"]  # parse_value, slug: set_options'

def _applicable(row, sets: dict[str, Any]) -> dict[str, Any]:
    """The keys of `sets` that apply to the row: every section key, and the method keys its method has."""
    mine = method_fields(row.method)
    return {k: v for k, v in sets.items() if not k.startswith("method.") or k.split(".", 1)[1] in mine}


def _runs(row) -> bool:
    return row.implemented and not row.select and not row.derived and not row.reference and not row.released


def _why_no_runs(row) -> str:
    if row.select:
        return f"it shows the best row of {row.select.table}: vary that table's rows"
    if row.derived:
        return "it is computed from other rows: vary those"
    if row.reference:
        return "it shows a published number"
    if row.released:
        return "it evaluates the authors' checkpoint: vary the row it loads into"
    return "its method is not implemented"


def unknown_row(label: str, tables: list) -> ConfigError:
    listing = "; ".join(f"{t.id}: {', '.join(repr(r.label) for r in t.rows)}" for t in tables)
    return ConfigError(f"unknown row {label!r} (rows of {listing})")


def vary_table(table, sets: dict[str, Any], rows: list[str] | None, profile: str, notes: list[str]):
    """(table with a variant after each varied row, {registered label: variant label}). The registered rows
    stay in the table unchanged; nothing varies when no key applies ({} returned). `notes`: the stderr lines to
    print once every variant has passed the schema (a variant that equals its row)."""
    own: dict[str, dict[str, Any]] = {}  # label -> the keys set on that row itself
    for row in table.rows:
        if rows and row.label in rows and not _runs(row):
            raise ConfigError(f"--set: row {row.label!r} of {table.id} has no runs of its own ({_why_no_runs(row)}); "
                              "nothing to vary")
        if _runs(row) and (not rows or row.label in rows):
            keys = _applicable(row, sets)
            if rows and len(keys) < len(sets):
                lacking = sorted(set(sets) - set(keys))[0]
                raise ConfigError(f"--set {lacking}: row {row.label!r} of {table.id} (method {row.method!r}) has no "
                                  f"field {lacking.split('.', 1)[1]!r}")
            if keys:
                own[row.label] = keys
    shown = dict(own)  # label -> settings in its label: its own and those of the varied rows it builds on
    changed = True
    while changed:
        changed = False
        for row in table.rows:
            if _runs(row) and (not rows or row.label in rows) and any(d in shown for d in row.depends_on):
                merged = {**{k: v for d in row.depends_on if d in shown for k, v in shown[d].items()},
                          **shown.get(row.label, {})}
                if merged != shown.get(row.label):
                    shown[row.label], changed = dict(sorted(merged.items())), True
    if not shown:
        return table, {}
    new = {label: f"{label} [{settings_text(s)}]" for label, s in shown.items()}

    def ref(label: str | None) -> str | None:
        return new.get(label, label) if label else label

    out_rows = []
    for row in table.rows:
        out_rows.append(row)
        if row.label in new:
            out_rows.append(dataclasses.replace(row, label=new[row.label], init_from=ref(row.init_from),
                                                teacher=ref(row.teacher), ensemble=tuple(map(ref, row.ensemble))))
    profiles = {}
    for name, prof in table.profiles.items():
        extra = {new[label]: {**prof.rows.get(label, {}), **own.get(label, {})} for label in new}
        profiles[name] = dataclasses.replace(prof, rows={**prof.rows, **extra})
    row_resources = {p: {**per, **{new[label]: per[label] for label in new if label in per}}
                     for p, per in table.row_resources.items()}
    varied = dataclasses.replace(table, rows=out_rows, profiles=profiles, row_resources=row_resources)
    from semcl.registry.tables import check_batch_split, check_dataset

    for label in new:  # the schema and the method's dataset check see every value before anything is planned
        row = varied.row(new[label])
        where = (f"--set {settings_text(own.get(label, {})) or '(from its base)'} on {table.id} row {label!r}, "
                 f"profile {profile!r}")
        cfg = build_config(varied.config_tree(row, profile), where=where)
        check_dataset(cfg, where)
        check_batch_split(cfg.optim.batch_size, varied.resources_for(row.label, profile), where)
        if label in own and row.depends_on == table.row(label).depends_on and \
                hashable_config(cfg) == hashable_config(table.resolve(table.row(label), profile)):
            notes.append(f"semcl: --set {settings_text(own[label])}: row {label!r} of {table.id} already has these "
                         f"values under profile {profile!r}; its variant's runs are the registered row's")
    return varied, new


def only_rows(table, labels: list[str]):
    """The table with only these rows and the rows they build on (or compare, for derived rows)."""
    keep: set[str] = set()
    stack = list(labels)
    while stack:
        label = stack.pop()
        if label in keep:
            continue
        keep.add(label)
        row = table.row(label)
        stack.extend(row.depends_on)
        stack.extend(x for pair in row.derived for x in pair)
    return dataclasses.replace(table, rows=[r for r in table.rows if r.label in keep])


def vary_grid(table, grid: list[dict[str, Any]], rows: list[str] | None, profile: str, notes: list[str]):
    """(table with every variant of the grid, the variant labels): `vary_table` per variant, merged so that each
    registered row is followed by its variants in grid order. A variant two settings share (a swept key its
    method lacks) appears once."""
    parts = [vary_table(table, sets, rows, profile, notes) for sets in grid]
    if len(parts) == 1:
        return parts[0][0], list(parts[0][1].values())
    built = {row.label: row for varied, _ in parts for row in varied.rows}
    out_rows, labels = [], []
    for row in table.rows:
        out_rows.append(row)
        for _, new in parts:
            if row.label in new and new[row.label] not in labels:
                labels.append(new[row.label])
                out_rows.append(built[new[row.label]])
    profiles = {name: dataclasses.replace(prof, rows={k: v for varied, _ in parts
                                                      for k, v in varied.profiles[name].rows.items()})
                for name, prof in table.profiles.items()}
    row_resources = {p: {k: v for varied, _ in parts for k, v in varied.row_resources[p].items()}
                     for p in table.row_resources}
    return dataclasses.replace(table, rows=out_rows, profiles=profiles, row_resources=row_resources), labels


def no_row_has(texts: list[str], grid: list[dict[str, Any]], where: str) -> ConfigError:
    return ConfigError(f"--set {sweep_text(texts)}: no row of {where} has "
                       f"{'these keys' if len(grid[0]) > 1 else 'this key'}")


def variant_tables(tables: list, texts: list[str] | None, rows: list[str] | None, profile: str) -> list:
    """What `plan`, `run`, `check` and `status` work on. With `--set`: per table, only its variant rows (one per
    value of a swept key; and the registered rows they build on); a table no key applies to is left out with
    one stderr line, and none at all is an error. Without: the `--row` rows (all when none)."""
    for label in rows or []:
        if not any(label in (r.label for r in t.rows) for t in tables):
            raise unknown_row(label, tables)
    if not texts:
        if not rows:
            return tables
        return [only_rows(t, [r.label for r in t.rows if r.label in rows]) for t in tables
                if any(r.label in rows for r in t.rows)]
    grid = parse_grid(texts)
    out, untouched, notes = [], [], []
    for table in tables:
        mine = [r.label for r in table.rows if r.label in rows] if rows else None
        if rows and not mine:
            continue
        varied, labels = vary_grid(table, grid, mine, profile, notes)
        if labels:
            out.append(only_rows(varied, labels))
        else:
            untouched.append(table.id)
    if not out:
        raise no_row_has(texts, grid, ", ".join(t.id for t in tables))
    print_notes(notes)
    if untouched:
        print(f"semcl: --set {sweep_text(texts)}: no row of {', '.join(untouched)} has it; left out",
              file=sys.stderr)
    return out


def table_view(table, texts: list[str] | None, rows: list[str] | None, profile: str):
    """What `table --set` (and `curves --set`) render: every registered row, each varied one followed by its
    variants."""
    if rows and not texts:
        raise ConfigError("--row selects the rows --set varies in `semcl table`; add --set key=value")
    for label in rows or []:
        if label not in (r.label for r in table.rows):
            raise unknown_row(label, [table])
    grid, notes = parse_grid(texts), []
    varied, labels = vary_grid(table, grid, rows, profile, notes)
    if not labels:
        raise no_row_has(texts, grid, table.id)
    print_notes(notes)
    return varied


def print_notes(notes: list[str]) -> None:
    for line in dict.fromkeys(notes):
        print(line, file=sys.stderr)


def plan_index(tables: list, profile: str) -> dict:
    """The shape of semcl.registry.index.load_index for these (varied or row-selected) tables."""
    from semcl.registry.index import profile_runs
    from semcl.registry.index_store import table_meta

    return {"tables": [table_meta(t) for t in tables],
            "runs": {t.id: profile_runs(t, profile) for t in tables if profile in t.profiles}}
