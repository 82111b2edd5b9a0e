"""The typed schema of one registry entry (experiments/<paper>/<table>.yaml), validated strictly.

`parse_entry(doc, where)` checks a parsed YAML document against `EntrySpec` with the run config's
checker (semcl.schema): unknown keys, wrong types (`seeds: many`), missing keys, negative or
repeated seeds, seeds of 2**32 or more (numpy would refuse them after submission), non-finite
numbers, and ids or row labels outside the safe patterns all raise one ConfigError naming the
file and the key. Columns are validated by their evaluation
(semcl.evals.protocols), rows' methods and links by semcl.registry.tables. torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from semcl.errors import ConfigError
from semcl.schema import NON_EMPTY, NON_NEGATIVE, SEED, UNIQUE, build

DEFAULT_SEEDS = [123, 546, 937]
SEEDS_RULE = {**SEED, **UNIQUE, **NON_EMPTY}  # 0 <= seed < 2**32: numpy seeds every run

# A table id becomes a results folder, a SLURM job name and part of log lines: lower-case path parts.
SAFE_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*")
# Row labels are free text in tables and `--row` arguments: letters of any script (τ, α, λ), digits,
# spaces and the punctuation the registry uses; no quotes, backslash, $, backtick, |, &, <, >, newline
# or other control characters, so a label can never end or extend a shell word or a log line. (';'
# stays allowed: an existing label uses it, and labels are never put into a shell script.)
SAFE_LABEL = re.compile(r"[\w()\[\]+×/.,=:;%@±·≤≥→-]+( [\w()\[\]+×/.,=:;%@±·≤≥→-]+)*")
# Column keys name metrics in CSV headers and figure axes.


@dataclass
class DerivedEntry:
    """A row computed from other rows' runs: per seed, the mean over `pairs` of (row A − row B) on
    every measured column (e.g. SCNS − KD averaged over the teacher/student pairs)."""

    pairs: list[list[str]] = field(metadata=NON_EMPTY)  # each [A, B]: row labels of this table


@dataclass
class ReleasedEntry:
    """`released:` the authors' checkpoint a row evaluates (no training): the official file's name (a path
    under the folder given to `semcl verify`), the page that links it, its size and sha256 where known (else
    recorded at first use), the layout its converter reads (semcl.models.released.LAYOUTS), the row of this
    table whose network it loads into, and the authors' training log (the page linking it) where one exists."""

    file: str
    url: str
    layout: str
    network: str
    size: int | None = field(default=None, metadata=NON_NEGATIVE)
    sha256: str | None = None
    log: str | None = None


@dataclass
class RowEntry:
    label: str
    method: str | None = None  # required unless `derived`
    overrides: dict[str, Any] | None = None
    reported: dict[str, Any] | None = None  # column key -> null | {value, provenance, source, std} | a list
    init_from: str | None = None
    ensemble: list[str] | None = None
    teacher: str | None = None
    derived: DerivedEntry | None = None
    # no runs of its own: the row of another table chosen by a criterion (see SelectEntry)
    select: SelectEntry | None = None
    # the authors' released checkpoint, evaluated only (semcl verify); excludes every training key
    released: ReleasedEntry | None = None


@dataclass
class SelectEntry:
    """`select: {table: rince/tab10, column: top1, best: max}`: this row shows the row of `table`
    whose mean (over seeds) of `column` is the largest (`max`) or smallest (`min`), with all its
    cells; the choice is named in the table notes. E.g. a main-table row that the paper reports as
    "the grid value with the best accuracy" of an ablation table."""

    table: str
    column: str
    best: str = "max"


@dataclass
class ProfileEntry:
    overrides: dict[str, Any] | None = None
    # {row label: {dotted key: value}}, applied after `overrides`: a row that keeps its own schedule under a
    # shortened profile (e.g. Decouple's short second stage while the profile cuts stage one's epochs)
    rows: dict[str, dict[str, Any]] | None = None
    substitute: dict[str, str | None] | None = None
    seeds: list[int] | None = field(default=None, metadata=SEEDS_RULE)
    note: str = ""


@dataclass
class EntrySpec:
    id: str
    paper: str
    source: str
    title: str
    columns: list[Any]  # each validated by its evaluation (semcl.evals.protocols.validate_column)
    rows: list[RowEntry]
    preset: str | None = None
    seeds: list[int] = field(default_factory=lambda: list(DEFAULT_SEEDS), metadata=SEEDS_RULE)
    profiles: dict[str, ProfileEntry | None] | None = None
    deviations: list[str] | None = None
    notes: list[str] | None = None
    resources: dict[str, Any] | None = None  # checked by semcl.registry.resources.parse_resources
    figure: dict[str, Any] | None = None


def check_pattern(value: str, pattern: re.Pattern, key: str, where: str, what: str) -> None:
    if not pattern.fullmatch(value):
        raise ConfigError(f"{where}: '{key}' = {value!r} is not {what}")


def parse_entry(doc: Any, where: str) -> EntrySpec:
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: a registry entry must be a mapping")
    entry = build(EntrySpec, doc, "", where)
    check_pattern(entry.id, SAFE_ID, "id", where, "a table id (lower-case letters, digits, _ . - in '/'-separated parts)")
    for i, row in enumerate(entry.rows):
        check_pattern(row.label, SAFE_LABEL, f"rows[{i}].label", where,
                      "a safe row label (letters, digits, single spaces and ( ) [ ] + × / . , = : ; % @ ± · -)")
        if row.select is not None:
            check_pattern(row.select.table, SAFE_ID, f"rows[{i}].select.table", where, "a table id")
            if row.select.best not in ("max", "min"):
                raise ConfigError(f"{where}: 'rows[{i}].select.best' = {row.select.best!r} is not 'max' or 'min'")
            others = [k for k in ("overrides", "init_from", "ensemble", "teacher") if getattr(row, k)]
            if others:
                raise ConfigError(f"{where}: 'rows[{i}]': key 'select' excludes key {others[0]!r} "
                                  "(a selecting row has no runs of its own)")
        if row.released is not None:
            _check_released(row, f"rows[{i}]", where)
    return entry


SHA256 = re.compile(r"[0-9a-f]{64}")
# a released file's name: a relative path of safe parts (it is looked up under the folder `semcl verify` is given)
SAFE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*")


def _check_released(row: RowEntry, key: str, where: str) -> None:
    """A released row evaluates a file: no method, no training keys, no other row's runs."""
    others = [k for k in ("method", "overrides", "init_from", "ensemble", "teacher", "derived", "select")
              if getattr(row, k)]
    if others:
        raise ConfigError(f"{where}: '{key}': key 'released' excludes key {others[0]!r} "
                          "(the authors' checkpoint is evaluated, never trained)")
    rel = row.released
    check_pattern(rel.file, SAFE_FILE, f"{key}.released.file", where, "a relative file path of safe parts")
    if rel.sha256 is not None:
        check_pattern(rel.sha256, SHA256, f"{key}.released.sha256", where, "64 lower-case hex digits")
