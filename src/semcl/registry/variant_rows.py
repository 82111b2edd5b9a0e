"""Variants from the command line: `--set key=value` on `plan`, `run`, `check` and `table`.

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
import hashlib
import json
import re
import sys
from typing import Any

import yaml

from semcl.config import hashable_config
from semcl.errors import ConfigError
from semcl.run_config import build_config, section_types
from semcl.yaml_strict import StrictLoader

# YAML 1.1 reads "1e-3" as a string; on the command line it means the number
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def _method_fields(method: str | None) -> frozenset[str]:
    from semcl.registry.tables import _method_fields as fields

    return fields(method)


def parse_value(raw: str, text: str) -> Any:
    """A YAML scalar or flow list (`0.1`, `true`, `null`, `crop_flip`, `[0.1, 0.225]`)."""
    try:
        value = yaml.load(raw, Loader=StrictLoader) if raw else None  # no repeated keys, no alias bombs
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {text!r}: the value is not YAML ({getattr(err, 'problem', err)})") from None
    if isinstance(value, str) and _FLOAT.match(value):
        value = float(value)
    if isinstance(value, dict):
        raise ConfigError(f"--set {text!r}: the value must be a scalar or a list, not a mapping")
    return value


def check_key(key: str, text: str) -> None:
    """`key` names a field of the run config (a method field of some method for `method.*`)."""
    section, _, name = key.partition(".")
    if section == "method":
        if name == "name":
            raise ConfigError(f"--set {text!r}: key 'method.name' cannot be varied (a row's method is the row)")
        if name not in _method_fields(None):
            raise ConfigError(f"--set {text!r}: unknown key {key!r} (no method has field {name!r}; "
                              "`semcl show <table>` lists each row's method and overrides)")
        return
    sections = section_types()
    if section not in sections or not name or "." in name:
        raise ConfigError(f"--set {text!r}: key {key!r} is not <section>.<field> with a section in "
                          f"{sorted((*sections, 'method'))}")
    known = sorted(f.name for f in dataclasses.fields(sections[section]))
    if name not in known:
        raise ConfigError(f"--set {text!r}: unknown key {key!r} (known in {section}: {', '.join(known)})")


def parse_sets(texts: list[str] | None) -> dict[str, Any]:
    """{dotted key: value} from `key=value` texts, sorted by key (the label and the slug do not depend on
    the order they were typed in)."""
    out: dict[str, Any] = {}
    for text in texts or []:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {text!r}: expected key=value (e.g. optim.lr=0.1)")
        check_key(key, text)
        if key in out:
            raise ConfigError(f"--set: key {key!r} is given twice")
        out[key] = parse_value(raw.strip(), text)
    return dict(sorted(out.items()))


def show_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def settings_text(sets: dict[str, Any]) -> str:
    return ", ".join(f"{k}={show_value(v)}" for k, v in sets.items())


def slug(texts: list[str]) -> str:
    """A folder name for a set of settings: readable, and unique by its hash."""
    sets = parse_sets(texts)
    readable = re.sub(r"[^A-Za-z0-9._=-]+", "_", ",".join(f"{k}={show_value(v)}" for k, v in sets.items()))[:60]
    digest = hashlib.sha256(json.dumps(sets, sort_keys=True).encode()).hexdigest()[:8]
    return f"{readable}-{digest}"


def _applicable(row, sets: dict[str, Any]) -> dict[str, Any]:
    """The keys of `sets` that apply to the row: every section key, and the method keys its method has."""
    mine = _method_fields(row.method)
    return {k: v for k, v in sets.items() if not k.startswith("method.") or k.split(".", 1)[1] in mine}


def _runs(row) -> bool:
    return row.implemented and not row.select and not row.derived and not row.reference


def _why_no_runs(row) -> str:
    if row.select:
        return f"it shows the best row of {row.select.table}: vary that table's rows"
    if row.derived:
        return "it is computed from other rows: vary those"
    if row.reference:
        return "it shows a published number"
    return "its method is not implemented"


def _unknown_row(label: str, tables: list) -> ConfigError:
    listing = "; ".join(f"{t.id}: {', '.join(repr(r.label) for r in t.rows)}" for t in tables)
    return ConfigError(f"unknown row {label!r} (rows of {listing})")


def vary_table(table, sets: dict[str, Any], rows: list[str] | None, profile: str):
    """(table with a variant after each varied row, {registered label: variant label}). The registered rows
    stay in the table unchanged; nothing varies when no key applies ({} returned)."""
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
    from semcl.registry.tables import check_dataset

    for label in new:  # the schema and the method's dataset check see every value before anything is planned
        row = varied.row(new[label])
        where = (f"--set {settings_text(own.get(label, {})) or '(from its base)'} on {table.id} row {label!r}, "
                 f"profile {profile!r}")
        cfg = build_config(varied.config_tree(row, profile), where=where)
        check_dataset(cfg, where)
        if label in own and row.depends_on == table.row(label).depends_on and \
                hashable_config(cfg) == hashable_config(table.resolve(table.row(label), profile)):
            print(f"semcl: --set {settings_text(own[label])}: row {label!r} of {table.id} already has these values "
                  f"under profile {profile!r}; its variant's runs are the registered row's", file=sys.stderr)
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


def variant_tables(tables: list, texts: list[str] | None, rows: list[str] | None, profile: str) -> list:
    """What `plan`, `run` and `check` work on. With `--set`: per table, only its variant rows (and the
    registered rows they build on); a table no key applies to is left out with one stderr line, and none
    at all is an error. Without: the `--row` rows (all when none)."""
    for label in rows or []:
        if not any(label in (r.label for r in t.rows) for t in tables):
            raise _unknown_row(label, tables)
    if not texts:
        if not rows:
            return tables
        return [only_rows(t, [r.label for r in t.rows if r.label in rows]) for t in tables
                if any(r.label in rows for r in t.rows)]
    sets = parse_sets(texts)
    out, untouched = [], []
    for table in tables:
        mine = [r.label for r in table.rows if r.label in rows] if rows else None
        if rows and not mine:
            continue
        varied, new = vary_table(table, sets, mine, profile)
        if new:
            out.append(only_rows(varied, list(new.values())))
        else:
            untouched.append(table.id)
    if not out:
        raise ConfigError(f"--set {settings_text(sets)}: no row of {', '.join(t.id for t in tables)} has "
                          f"{'these keys' if len(sets) > 1 else 'this key'}")
    if untouched:
        print(f"semcl: --set {settings_text(sets)}: no row of {', '.join(untouched)} has it; left out",
              file=sys.stderr)
    return out


def table_view(table, texts: list[str] | None, rows: list[str] | None, profile: str):
    """What `table --set` renders: every registered row, each varied one followed by its variant."""
    if rows and not texts:
        raise ConfigError("--row selects the rows --set varies in `semcl table`; add --set key=value")
    for label in rows or []:
        if label not in (r.label for r in table.rows):
            raise _unknown_row(label, [table])
    sets = parse_sets(texts)
    varied, new = vary_table(table, sets, rows, profile)
    if not new:
        raise ConfigError(f"--set {settings_text(sets)}: no row of {table.id} has "
                          f"{'these keys' if len(sets) > 1 else 'this key'}")
    return varied


def plan_index(tables: list, profile: str) -> dict:
    """The shape of semcl.registry.index.load_index for these (varied or row-selected) tables."""
    from semcl.registry.index import _profile_runs
    from semcl.registry.index_store import table_meta

    return {"tables": [table_meta(t) for t in tables],
            "runs": {t.id: _profile_runs(t, profile) for t in tables if profile in t.profiles}}
