"""Paper numbers the user supplies: an overlay file beside the registry, never part of a run id.

`semcl numbers add / import / remove` write the file (default <results>/numbers.yaml, else
$SEMCL_NUMBERS or --numbers PATH; `import` reads its CSV with semcl.report.numbers_csv); `show`, `table`,
`report` and `claims` read it through `Overlay.apply`, which gives a table's cells the user's values with
provenance `user-supplied` and the source the user gave. A cell the registry already fills keeps the registry's
value unless the user's entry was added with --force (`override: true`); the overridden value stays on the cell
(`Reported.overrides`) so the table's note can say what it replaced.

File layout (YAML, written atomically):
    numbers:
      - {table: rince/tab2, row: RINCE-in, column: top1, value: 77.5, std: 0.2,
         source: "RINCE paper, Table 2", override: false}
"""

from __future__ import annotations

import dataclasses
import math
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import yaml

from semcl.errors import ConfigError
from semcl.files import write_text_atomic
from semcl.yaml_strict import StrictLoader

ENV = "SEMCL_NUMBERS"
FILE_NAME = "numbers.yaml"
USER = "user-supplied"
_KEYS = {"table": str, "row": str, "column": str, "value": float, "std": (float, type(None)), "source": str,
         "override": bool}
_HEADER = ("# Paper numbers supplied by the user (semcl numbers add / import): shown in tables as user-supplied,\n"
           "# never part of the registry or of any run id. Edit with `semcl numbers`.\n")


@dataclass(frozen=True)
class UserNumber:
    table: str
    row: str
    column: str  # the column key
    value: float
    std: float | None
    source: str
    override: bool = False  # added with --force: wins over a registry value of the same cell

    @property
    def cell(self) -> tuple[str, str, str]:
        return self.table, self.row, self.column

    def describe(self) -> str:
        std = f" ± {self.std:g}" if self.std is not None else ""
        return f"{self.table} row {self.row!r} column {self.column!r}: {self.value:g}{std} ({self.source})"


def overlay_path(explicit: str | None, results_root: Path) -> Path:
    """--numbers PATH, else $SEMCL_NUMBERS, else <results root>/numbers.yaml."""
    if explicit:
        return Path(explicit)
    return Path(os.environ[ENV]) if os.environ.get(ENV) else results_root / FILE_NAME


def _number(value: object, where: str, key: str, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: key '{key}' = {value!r} is not a finite number")
    if key == "std" and value < 0:
        raise ConfigError(f"{where}: key 'std' = {value!r} is negative")
    return float(value)


MAX_TEXT = 500  # characters of a source / row / column a user supplies


def plain_text(value: str, where: str, key: str) -> str:
    """`value` when it is one line of printable text: a line break or other control character in a source would
    leave the `% ` comment of a LaTeX table or a Markdown table row and reach every reader of a shared store."""
    bad = next((ch for ch in value if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise ConfigError(f"{where}: key '{key}' holds the control character U+{ord(bad):04X}; one line of text only")
    if len(value) > MAX_TEXT:
        raise ConfigError(f"{where}: key '{key}' is {len(value)} characters long (at most {MAX_TEXT})")
    return value


def parse_entry(d: object, where: str) -> UserNumber:
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(_KEYS)}")
    unknown = sorted(set(d) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}' (allowed: {', '.join(_KEYS)})")
    for key in ("table", "row", "column", "source"):
        if not isinstance(d.get(key), str) or not d[key].strip():
            raise ConfigError(f"{where}: key '{key}' must be a non-empty string")
        plain_text(d[key], where, key)
    if not isinstance(d.get("override", False), bool):
        raise ConfigError(f"{where}: key 'override' must be true or false")
    return UserNumber(d["table"], d["row"], d["column"], _number(d.get("value"), where, "value"),
                      _number(d.get("std"), where, "std", allow_none=True), d["source"], d.get("override", False))


def load_numbers(path: Path) -> list[UserNumber]:
    """The overlay's entries ([] when the file does not exist); ConfigError naming the file and key."""
    if not path.exists():
        return []
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=StrictLoader)  # no repeated keys, no alias bombs
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: unreadable numbers overlay ({type(err).__name__}: {str(err).splitlines()[0]})") \
            from None
    if data is None:
        return []
    if not isinstance(data, dict) or set(data) - {"numbers"} or not isinstance(data.get("numbers", []), list):
        raise ConfigError(f"{path}: expected one key 'numbers' holding a list")
    out = [parse_entry(d, f"{path}: numbers[{i}]") for i, d in enumerate(data.get("numbers") or [])]
    seen: set[tuple[str, str, str]] = set()
    for i, n in enumerate(out):
        if n.cell in seen:
            raise ConfigError(f"{path}: numbers[{i}]: a second value for {n.table} row {n.row!r} column {n.column!r}")
        seen.add(n.cell)
    return out


def save_numbers(path: Path, numbers: list[UserNumber]) -> None:
    """Write the overlay atomically (temp file + rename): a crash leaves the old file or the new one."""
    body = {"numbers": [dataclasses.asdict(n) for n in sorted(numbers, key=lambda n: n.cell)]}
    write_text_atomic(path, _HEADER + yaml.safe_dump(body, sort_keys=False, allow_unicode=True))


def checked(table, row: str, column: str, where: str) -> str:
    """The column key of `column` (a key or a label) on `table`, after checking the row; ConfigError naming
    what is unknown and what exists."""
    labels = [r.label for r in table.rows]
    if row not in labels:
        raise ConfigError(f"{where}: table {table.id} has no row {row!r} (rows: {', '.join(map(repr, labels))})")
    for c in table.columns:
        if column in (c.key, c.label):
            return c.key
    raise ConfigError(f"{where}: table {table.id} has no column {column!r} "
                      f"(columns: {', '.join(c.key for c in table.columns)})")


def in_range(table, n: UserNumber, where: str) -> None:
    """The value (and std) within what the column can hold (semcl.evals.protocols.value_bounds), every text one
    line; ConfigError naming the cell otherwise."""
    from semcl.evals.protocols import value_bounds

    for key in ("table", "row", "column", "source"):
        plain_text(getattr(n, key), where, key)
    _number(n.value, where, "value")
    _number(n.std, where, "std", allow_none=True)
    column = next(c for c in table.columns if c.key == n.column)
    bounds = value_bounds(column)
    if bounds is None:
        return
    lo, hi = bounds
    if not lo <= n.value <= hi:
        raise ConfigError(f"{where}: key 'value' = {n.value:g} is outside [{lo:g}, {hi:g}], the range of "
                          f"{n.table} column {n.column!r} ({column.eval})")
    if n.std is not None and n.std > hi - lo:
        raise ConfigError(f"{where}: key 'std' = {n.std:g} is wider than the range [{lo:g}, {hi:g}] of "
                          f"{n.table} column {n.column!r}")


def registry_value(table, n: UserNumber):
    """The registry's own Reported for the cell of `n` (None when the registry has no number)."""
    return table.row(n.row).reported.get(n.column)


def merge(existing: list[UserNumber], new: list[UserNumber], get_table, force: bool, where: str) -> list[str]:
    """Check `new` against the registry (a cell it fills needs `force`) and fold it into `existing` in place;
    the lines saying what happened. Nothing is changed when any entry fails."""
    by_cell = {n.cell: i for i, n in enumerate(existing)}
    said, staged = [], []
    for n in new:
        table = get_table(n.table)
        n = dataclasses.replace(n, column=checked(table, n.row, n.column, where))
        in_range(table, n, where)
        reg = registry_value(table, n)
        if reg is not None and not force:
            raise ConfigError(f"{where}: {n.table} row {n.row!r} column {n.column!r} has a registry value "
                              f"{reg.value:g} [{reg.provenance}] ({reg.source}); pass --force to override it")
        n = dataclasses.replace(n, override=reg is not None)
        verb = "replaced" if n.cell in by_cell else "added"
        over = f"; overrides the registry's {reg.value:g} [{reg.provenance}]" if n.override else ""
        staged.append(n)
        said.append(f"{verb}: {n.describe()}{over}")
    for n in staged:
        if n.cell in by_cell:
            existing[by_cell[n.cell]] = n
        else:
            by_cell[n.cell] = len(existing)
            existing.append(n)
    return said


class Overlay:
    """The user's numbers of one overlay file, applied to tables as they are read."""

    def __init__(self, path: Path, numbers: list[UserNumber] | None = None):
        self.path = path
        self.numbers = load_numbers(path) if numbers is None else numbers
        self.warnings: list[str] = []  # entries a table could not take (stale row / column, registry wins)

    def apply(self, table):
        """`table` with the overlay's cells (provenance user-supplied); the table itself is not changed."""
        mine = [n for n in self.numbers if n.table == table.id]
        if not mine:
            return table
        from semcl.registry.tables import Reported

        rows = {r.label: dict(r.reported) for r in table.rows}
        keys = {c.key for c in table.columns}
        for n in mine:
            if n.row not in rows or n.column not in keys:
                self._warn(f"{self.path}: {n.describe()}: no such row or column in the registry any more; not shown")
                continue
            try:
                in_range(table, n, f"{self.path}: {n.table} row {n.row!r} column {n.column!r}")
            except ConfigError as err:  # a hand-edited overlay: the table stays readable, the value is not shown
                self._warn(f"{err}; not shown")
                continue
            reg = rows[n.row].get(n.column)
            if reg is not None and not n.override:
                self._warn(f"{self.path}: {n.describe()}: not shown, the registry has {reg.value:g} [{reg.provenance}] "
                           f"(semcl numbers add ... --force to override it)")
                continue
            rows[n.row][n.column] = Reported(n.value, USER, n.source, n.std,
                                             overrides=reg)
        new_rows = [dataclasses.replace(r, reported=rows[r.label]) for r in table.rows]
        return dataclasses.replace(table, rows=new_rows)

    def apply_all(self, tables: dict) -> dict:
        return {tid: self.apply(t) for tid, t in tables.items()}

    def _warn(self, line: str) -> None:
        if line not in self.warnings:
            self.warnings.append(line)
