"""The one CSV writer: every CSV the suite writes (tables, curves, figures' data, claims, the numbers template, a
run's similarity matrix and PR curve, the RINCE gradient figures) goes through `csv_text` or `frame_csv_text`.

A CSV is opened in spreadsheets, and a spreadsheet reads a cell that starts with `=`, `+`, `-`, `@`, a tab or a
carriage return as a formula: a registry label such as "+ kNN positives" shows `#NAME?`, a crafted `=HYPERLINK(...)`
runs. So every text cell is escaped by its value, whatever the column's dtype (pandas 3 types text `str`, not
`object`): a string that starts like a formula and is not a plain decimal number gets a leading apostrophe, the
convention spreadsheets read as "this is text" (OWASP, "CSV Injection"). A string that already starts with an
apostrophe gets one too, so that `read_cell` undoes exactly what `csv_cell` did (a spreadsheet shows `''x` as `'x`).
Numbers (int, float, numpy scalars; a decimal string such as "-2.5") are written as they are.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from semcl.files import write_text_atomic

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula
TEXT_MARK = "'"  # a leading apostrophe: the cell is text
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")  # what a spreadsheet reads as a number
LINE_END = "\n"


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell a spreadsheet shows as the text it is: a string starting like a formula (and not a
    decimal number) or with an apostrophe gets a leading apostrophe; every other value is unchanged."""
    if not isinstance(value, str):
        return value
    if value.startswith(TEXT_MARK) or (value.startswith(FORMULA_START) and not _DECIMAL.fullmatch(value)):
        return TEXT_MARK + value
    return value


def read_cell(text: str) -> str:
    """The text `csv_cell` was given for the cell `text` (one leading apostrophe removed): the inverse of csv_cell
    on every string, and on a cell a spreadsheet user marked as text by typing an apostrophe."""
    return text[1:] if text.startswith(TEXT_MARK) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header and rows as CSV text, every cell through `csv_cell`, lines ending in `\\n`."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator=LINE_END)
    w.writerow([csv_cell(h) for h in header])
    w.writerows([csv_cell(v) for v in row] for row in rows)
    return buf.getvalue()


def frame_csv_text(frame) -> str:
    """A pandas DataFrame as CSV text (no index), every cell of every non-numeric column and every column name
    through `csv_cell` (a number in a text column stays a number)."""
    from pandas.api.types import is_datetime64_any_dtype, is_numeric_dtype

    out = frame.copy()
    for col in out.columns:
        if not (is_numeric_dtype(out[col].dtype) or is_datetime64_any_dtype(out[col].dtype)):  # these hold no str
            out[col] = out[col].astype(object).map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out.to_csv(index=False, lineterminator=LINE_END)


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """`csv_text(header, rows)` written atomically (semcl.files)."""
    write_text_atomic(path, csv_text(header, rows))


def write_frame_csv(path: Path, frame) -> None:
    """`frame_csv_text(frame)` written atomically (semcl.files)."""
    write_text_atomic(path, frame_csv_text(frame))
