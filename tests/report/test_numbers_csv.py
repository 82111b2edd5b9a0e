"""`semcl numbers template` -> a spreadsheet -> `semcl numbers import`: the template's labels that start like a
formula are written as text and read back as the registry's labels; a malformed, over-long or over-large file is
one line naming the file and line, read a bounded line at a time, and nothing of it is imported."""

from __future__ import annotations

import csv
import io
from contextlib import redirect_stderr, redirect_stdout

import pytest

from semcl.cli.main import main
from semcl.registry.tables import get_table
from semcl.report.numbers_csv import MAX_CSV_LINE_CHARS, MAX_CSV_LINES
from semcl.report.user_numbers import load_numbers

HEADER = "table,row,column,value,std,source\n"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def nums(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMCL_NUMBERS", raising=False)
    return tmp_path / "numbers.yaml"


@pytest.mark.parametrize("table_id", ["hsa/abl-components", "hsa/abl-stages"])
def test_the_hsa_templates_write_plus_labels_as_text_and_round_trip(tmp_path, nums, table_id):
    table = get_table(table_id)
    code, out, _ = _cli("numbers", "template", table_id)
    lines = out.splitlines()
    assert code == 0 and lines[0] == HEADER.strip()
    labels = [r.label for r in table.rows for _ in table.columns]
    assert any(label.startswith("+") for label in labels)
    cells = [row[1] for row in csv.reader(io.StringIO(out))][1:]
    assert cells == ["'" + label if label.startswith("+") else label for label in labels]  # text, never a formula
    filled = tmp_path / "filled.csv"
    filled.write_text(lines[0] + "\n" + "".join(line.replace(",,,", f",{60 + i}.5,,PDF p. 7") + "\n"
                                                for i, line in enumerate(lines[1:])))
    code, out, err = _cli("numbers", "import", str(filled), "--numbers", str(nums))
    assert code == 0, err
    got = load_numbers(nums)
    assert sorted((n.row, n.column, n.value) for n in got) == sorted(
        (r.label, c.key, 60 + i + 0.5) for i, (r, c) in enumerate((r, c) for r in table.rows for c in table.columns))
    # a spreadsheet saves the cell without its apostrophe: the same labels again
    saved = tmp_path / "saved.csv"
    saved.write_text(filled.read_text().replace(",'+", ",+"))
    again = tmp_path / "again.yaml"
    assert _cli("numbers", "import", str(saved), "--numbers", str(again))[0] == 0
    assert load_numbers(again) == got


def _quoted_over_limit() -> str:  # one field of 40 short lines, 160,000 characters: past the csv module's limit
    return HEADER + 'hsa/abl-components,MoCo v2,top1,1,,"' + "\n".join(["x" * 3999] * 40) + '"\n'


@pytest.mark.parametrize("body, message", [
    (HEADER + "hsa/abl-components,MoCo v2,top1,1,,\"" + "x" * 200_000 + "\"\n",
     f"line 2: longer than {MAX_CSV_LINE_CHARS} characters (the most a line of a numbers CSV may have)"),
    (HEADER + 'hsa/abl-components,MoCo v2,top1,1,,"RINCE\nmore\n',
     "line 2: not CSV (unexpected end of data)"),
    (_quoted_over_limit(), "line 2: not CSV (field larger than field limit (131072))"),
    ("table,row,column,value,std,source,source\n", "line 1: column 'source' appears twice"),
    (HEADER + "\n" * MAX_CSV_LINES, f"more than {MAX_CSV_LINES} lines (the most a numbers CSV may have)"),
])
def test_a_malformed_or_oversized_csv_is_one_line_and_imports_nothing(tmp_path, nums, body, message):
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "hsa/abl-components,MoCo v2,top1,70,,PDF\n")
    assert _cli("numbers", "import", str(good), "--numbers", str(nums))[0] == 0
    before = nums.read_bytes()
    bad = tmp_path / "bad.csv"
    bad.write_text(body + "hsa/abl-components,+ kNN positives,top1,71,,PDF\n")  # and a good line after it
    code, _, err = _cli("numbers", "import", str(bad), "--numbers", str(nums))
    assert code == 2 and err == f"semcl: error: {bad}: {message}\n"
    assert nums.read_bytes() == before  # nothing of the bad file was written


def test_the_file_is_read_a_line_at_a_time(tmp_path, nums):
    # an over-long second line, then bytes that are not UTF-8: a reader of the whole file would fail on the bytes
    # ("cannot read") before it saw any line; the line-at-a-time reader stops at the second line
    bad = tmp_path / "big.csv"
    bad.write_bytes(HEADER.encode() + b"a," + b"x" * 5_000_000 + b"\n\xff\xfe\n")
    code, _, err = _cli("numbers", "import", str(bad), "--numbers", str(nums))
    assert code == 2 and err == (f"semcl: error: {bad}: line 2: longer than {MAX_CSV_LINE_CHARS} characters "
                                 "(the most a line of a numbers CSV may have)\n")
    assert not nums.exists()
