"""The one CSV writer (semcl.csv_files): a text cell that a spreadsheet would read as a formula is written as text
(a leading apostrophe), by its value whatever the column's dtype; numbers stay numbers; `read_cell` undoes exactly
what the writer did."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from semcl.csv_files import csv_cell, csv_text, frame_csv_text, read_cell, write_frame_csv


@pytest.mark.parametrize("value, shown", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("@SUM(A1)", "'@SUM(A1)"), ("+cmd", "'+cmd"),
    ("-2+3", "'-2+3"), ("+ kNN positives", "'+ kNN positives"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("'quoted", "''quoted"), ("-inf", "'-inf"), ("-1_0", "'-1_0"), ("", ""),
    ("-2.5", "-2.5"), ("+3", "+3"), ("-1e-3", "-1e-3"), ("-.5", "-.5"), ("RINCE-in", "RINCE-in"), ("a=b", "a=b"),
    (76.5, 76.5), (-2.5, -2.5), (-3, -3), (None, None), (True, True),
])
def test_csv_cells_never_start_a_formula(value, shown):
    assert csv_cell(value) == shown


@pytest.mark.parametrize("text", ["=1+2", "+ kNN positives", "'", "''x", "'x", "-2.5", "-x", "plain", "@", ""])
def test_read_cell_undoes_exactly_what_csv_cell_did(text):
    assert read_cell(csv_cell(text)) == text


def test_a_frame_is_escaped_by_value_whatever_the_dtype_of_its_columns():
    frame = pd.DataFrame({"row": ["=1+2", "-2.5", "MoCo v2"],  # pandas 3: dtype str; pandas 2: object
                          "mixed": pd.Series([-1.5, "+x", None], dtype=object),
                          "mean": [-3.0, 0.25, float("nan")], "n": np.array([-1, 0, 2]),
                          "kind": pd.Categorical(["@a", "b", "@a"])})
    frame = frame.rename(columns={"kind": "=kind"})
    assert frame_csv_text(frame) == ("row,mixed,mean,n,'=kind\n"
                                     "'=1+2,-1.5,-3.0,-1,'@a\n"
                                     "-2.5,'+x,0.25,0,b\n"
                                     "MoCo v2,,,2,'@a\n")
    assert frame["row"].tolist() == ["=1+2", "-2.5", "MoCo v2"]  # the caller's frame is not changed


def test_rows_and_files_go_through_the_same_cells(tmp_path):
    text = csv_text(["name", "-x"], [["=a", -0.5], ["b,c", "'q"]])
    assert text == "name,'-x\n'=a,-0.5\n\"b,c\",''q\n"
    assert [[read_cell(c) for c in row] for row in csv.reader(io.StringIO(text))] == [
        ["name", "-x"], ["=a", "-0.5"], ["b,c", "'q"]]
    path = tmp_path / "f.csv"
    write_frame_csv(path, pd.DataFrame({"label": ["+ kNN positives"], "top1": [71.5]}))
    assert path.read_text() == "label,top1\n'+ kNN positives,71.5\n"
