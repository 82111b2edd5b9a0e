"""`semcl numbers template` and `semcl numbers import`: the paper numbers of a table as a CSV a user fills in a
spreadsheet, and that CSV read back into overlay entries (semcl.report.user_numbers).

The template goes through the one CSV writer (semcl.csv_files), so a row label that starts like a formula
("+ kNN positives") is written with a leading apostrophe; the importer reads every cell back through
`read_cell`, so the label is the registry's again. The importer reads a bounded line at a time and refuses a
file past MAX_CSV_LINES / MAX_CSV_CHARS, a malformed CSV (an unterminated quote, a field over the csv module's
limit) and a column named twice, each in one line naming the file and line.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

from semcl.csv_files import csv_text, read_cell
from semcl.errors import ConfigError
from semcl.report.user_numbers import UserNumber, parse_entry

CSV_COLUMNS = ("table", "row", "column", "value", "std", "source")
# bounds on a CSV to import: a filled template is a few hundred lines of under 200 characters
MAX_CSV_LINES = 100_000
MAX_CSV_CHARS = 16 * 2**20
MAX_CSV_LINE_CHARS = 4096


def _bounded_lines(f, path: Path):
    """The lines of the text file `f`, each read with a bound (a 300 MB line is never held whole); ConfigError past
    MAX_CSV_LINE_CHARS in one line, MAX_CSV_LINES lines or MAX_CSV_CHARS in all."""
    total = 0
    for number in itertools.count(1):
        line = f.readline(MAX_CSV_LINE_CHARS + 2)  # room for a CRLF
        if not line:
            return
        if number > MAX_CSV_LINES:
            raise ConfigError(f"{path}: more than {MAX_CSV_LINES} lines (the most a numbers CSV may have)")
        total += len(line)
        if len(line.rstrip("\r\n")) > MAX_CSV_LINE_CHARS:
            raise ConfigError(f"{path}: line {number}: longer than {MAX_CSV_LINE_CHARS} characters "
                              "(the most a line of a numbers CSV may have)")
        if total > MAX_CSV_CHARS:
            raise ConfigError(f"{path}: line {number}: more than {MAX_CSV_CHARS} characters in all "
                              "(the most a numbers CSV may have)")
        yield line


def read_csv(path: Path) -> list[UserNumber]:
    """Entries from a CSV with columns table,row,column,value,std,source (std may be empty; a line whose value
    and std are both empty is a cell left blank, as `semcl numbers template` writes them, and is skipped);
    ConfigError naming the file, line and key. The file is read a bounded line at a time (MAX_CSV_*); a cell the
    template escaped for spreadsheets (a leading apostrophe, semcl.csv_files) is read back as it was."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:  # a quoted field keeps its line breaks (then refused)
            return _read_records(csv.reader(_bounded_lines(f, path), strict=True), path)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read ({type(err).__name__}: {err})") from None


def _read_records(reader, path: Path) -> list[UserNumber]:
    try:
        head = next(reader, [])
    except csv.Error as err:
        raise ConfigError(f"{path}: line {reader.line_num}: not CSV ({err})") from None
    missing = [c for c in CSV_COLUMNS if c not in head and c != "std"]
    extra = [c for c in head if c not in CSV_COLUMNS]
    if missing or extra:
        raise ConfigError(f"{path}: line 1: columns must be {','.join(CSV_COLUMNS)} "
                          f"({'missing ' + missing[0] if missing else 'unknown ' + repr(extra[0])})")
    twice = next((c for i, c in enumerate(head) if c in head[:i]), None)
    if twice is not None:
        raise ConfigError(f"{path}: line 1: column {twice!r} appears twice")
    out, seen, blank = [], {}, 0
    end = reader.line_num  # the header's last line
    while True:
        try:
            fields = next(reader, None)
        except csv.Error as err:  # an unterminated quote, a field over the csv module's limit
            raise ConfigError(f"{path}: line {end + 1}: not CSV ({err})") from None
        if fields is None:
            break
        line, end = end + 1, reader.line_num  # the file line where the record starts (a quoted field may span lines)
        if not fields:
            continue
        where = f"{path}: line {line}"
        if len(fields) > len(head):
            raise ConfigError(f"{where}: more fields than the {len(head)} columns")
        rec = dict(zip(head, fields, strict=False))
        d: dict = {k: read_cell((rec.get(k) or "").strip()) for k in CSV_COLUMNS}
        if d["value"] == "" and d["std"] == "":
            blank += 1
            continue
        for key in ("value", "std"):
            raw = d[key]
            if key == "std" and raw == "":
                d[key] = None
                continue
            try:
                d[key] = float(raw)
            except ValueError:
                raise ConfigError(f"{where}: key '{key}' = {raw!r} is not a number") from None
        n = parse_entry(d, where)
        if n.cell in seen:
            raise ConfigError(f"{where}: a second value for {n.table} row {n.row!r} column {n.column!r} "
                              f"(first on line {seen[n.cell]})")
        seen[n.cell] = line
        out.append(n)
    if not out and not blank:
        raise ConfigError(f"{path}: no numbers (header only)")
    return out


def template_rows(table) -> list[dict]:
    """One CSV line per cell of `table` that the registry has no number for (every row, implemented or not, x
    every column), value / std / source empty: the user fills what the PDF prints and imports the file."""
    return [{"table": table.id, "row": row.label, "column": col.key, "value": "", "std": "", "source": ""}
            for row in table.rows for col in table.columns if row.reported.get(col.key) is None]


def write_template(table, out) -> int:
    """The template of `table` as CSV on the text stream `out`; returns the number of cells."""
    rows = template_rows(table)
    out.write(csv_text(CSV_COLUMNS, ([r[c] for c in CSV_COLUMNS] for r in rows)))
    return len(rows)
