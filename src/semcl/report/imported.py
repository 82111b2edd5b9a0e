"""Results of runs made by another tool (`semcl results import`): the user's MMSegmentation runs of the configs
semcl exports for gpaco/seg, detectron2 transfer logs for HSA's transfer rows. Kept apart from semcl's own runs and
from the paper-numbers overlay (semcl.report.user_numbers): these are our results, measured elsewhere.

Layout: one JSON record per imported cell (table, row, column, seed, profile) under
<results>/imports/<table with / as _>/<profile>/<cell digest>.json, holding the value, the `source` text, the
imported file's path and sha256 and the import time. Re-importing a cell is refused unless `replace`, which sets the
old record aside (renamed <digest>.replaced-<stamp>.json, never deleted), as `semcl results remove` does.

Tables read the records as lines of the long table (run_id "imported", source "imported from <source>"), so claims
judge them like any row and every rendering marks them (semcl.report.tables).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from semcl.errors import ConfigError, ResultsError
from semcl.files import move
from semcl.store import ResultsRoot
from semcl.store.run_folder import REPLACED

RUN_ID = "imported"  # the run_id of an imported line of the long table
CSV_COLUMNS = ("table", "row", "column", "seed", "value", "source")
MAX_BYTES = 8 * 2**20  # a results CSV of a few thousand cells is kilobytes; a bigger file is not one
MAX_FIELD = 4096  # csv's own limit is 128 KiB a field; a longer field here is a broken file (csv.Error, one line)
# the evaluations whose numbers are not a run's: a gain is computed by the table, `reported` / `features` hold none
NOT_IMPORTABLE = frozenset({"gain", "reported", "features"})


@dataclass(frozen=True)
class ImportedResult:
    table: str
    row: str
    column: str  # the column key
    seed: int
    profile: str
    value: float
    source: str  # the user's text: which tool, config and log
    file: str  # the CSV it came from, as given
    sha256: str  # of that file's bytes
    imported_at: str  # UTC, ISO 8601

    @property
    def cell(self) -> tuple[str, str, str, int, str]:
        return self.table, self.row, self.column, self.seed, self.profile

    def describe(self) -> str:
        return (f"{self.table} row {self.row!r} column {self.column!r} seed {self.seed} ({self.profile}): "
                f"{self.value:g} ({self.source})")


def table_folder(root: Path, table_id: str, profile: str) -> Path:
    return ResultsRoot(Path(root)).imports / table_id.replace("/", "_") / profile


def record_path(root: Path, cell: tuple[str, str, str, int, str]) -> Path:
    table, row, column, seed, profile = cell
    digest = hashlib.sha256(json.dumps([table, row, column, seed]).encode()).hexdigest()[:16]
    return table_folder(root, table, profile) / f"{digest}.json"


def _is_record(path: Path) -> bool:
    stem = path.name.removesuffix(".json")
    return path.name.endswith(".json") and len(stem) == 16 and all(c in "0123456789abcdef" for c in stem)


def _record(path: Path) -> ImportedResult:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        rec = ImportedResult(**d)
    except OSError as err:
        raise ResultsError(f"{path}: unreadable ({err.strerror or err})") from None
    except (ValueError, TypeError) as err:  # bad JSON, a missing or unknown key
        raise ResultsError(f"{path}: not an imported-result record ({type(err).__name__}: {err}); move it away") \
            from None
    bad_value = isinstance(rec.value, bool) or not isinstance(rec.value, int | float) or not math.isfinite(rec.value)
    if bad_value or record_path(path.parents[3], rec.cell) != path:
        raise ResultsError(f"{path}: key 'value' or the cell does not match the file's name; move it away")
    return rec


def load_imported(root: Path, table_id: str | None = None, profile: str | None = None) -> list[ImportedResult]:
    """The imported records of the results root (of one table / profile when named), set-aside ones excluded."""
    base = ResultsRoot(Path(root)).imports
    if not base.is_dir():
        return []
    tables = [table_id.replace("/", "_")] if table_id else sorted(p.name for p in base.iterdir() if p.is_dir())
    out = []
    for t in tables:
        profiles = [profile] if profile else sorted(p.name for p in (base / t).glob("*") if p.is_dir())
        for prof in profiles:
            folder = base / t / prof
            if folder.is_dir():
                out += [_record(p) for p in sorted(folder.iterdir()) if _is_record(p)]
    return sorted(out, key=lambda r: r.cell)


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def set_aside(path: Path) -> Path:
    """Rename a record out of the way (<digest>.replaced-<stamp>.json): nothing imported is ever deleted."""
    to = path.with_name(REPLACED.format(stem=path.stem, stamp=_stamp(), suffix=".json"))
    move(path, to)
    return to


def read_csv(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line, fields) of every record of a results CSV; ConfigError naming the file and line for a file too big, not
    UTF-8, with a missing, unknown or repeated header column, a broken quote or field, or a line of the wrong width.
    Streamed: the file is never read whole."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from None
    if size > MAX_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes, more than a results CSV can be ({MAX_BYTES:,})")
    out: list[tuple[int, dict[str, str]]] = []
    reader = None
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, strict=True)  # a stray quote is an error, not a guess
            head = next(reader, None)
            if head is None:
                raise ConfigError(f"{path}: line 1: empty file (expected the header {','.join(CSV_COLUMNS)})")
            head = [h.strip() for h in head]
            repeated = next((h for i, h in enumerate(head) if h in head[:i]), None)
            missing = [c for c in CSV_COLUMNS if c not in head]
            extra = [h for h in head if h not in CSV_COLUMNS]
            if repeated or missing or extra:
                why = (f"column {repeated!r} twice" if repeated else f"missing {missing[0]}" if missing
                       else f"unknown {extra[0]!r}")
                raise ConfigError(f"{path}: line 1: columns must be {','.join(CSV_COLUMNS)} ({why})")
            end = reader.line_num
            for fields in reader:
                line, end = end + 1, reader.line_num
                if not fields or all(not x.strip() for x in fields):
                    continue  # a blank line
                if len(fields) != len(head):
                    raise ConfigError(f"{path}: line {line}: {len(fields)} fields, the header has {len(head)}")
                long = next((h for h, x in zip(head, fields, strict=True) if len(x) > MAX_FIELD), None)
                if long:
                    raise ConfigError(f"{path}: line {line}: key {long!r} is longer than {MAX_FIELD} characters")
                out.append((line, {h: x.strip() for h, x in zip(head, fields, strict=True)}))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except csv.Error as err:
        raise ConfigError(f"{path}: line {reader.line_num if reader else 1}: not CSV ({err})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror or err})") from None
    if not out:
        raise ConfigError(f"{path}: no results (header only)")
    return out
