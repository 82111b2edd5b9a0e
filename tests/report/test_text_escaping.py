"""Text a user supplies reaches a table as data in every format: refused when it is not one line, escaped where it
is written (LaTeX, Markdown, CSV, HTML); a paper value outside its column's range is refused in one line."""

from __future__ import annotations

import csv
import dataclasses
import io
import shutil
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.evals.protocols import value_bounds
from semcl.registry.tables import Reported, get_table, load_registry
from semcl.report.escape import md_cell, tex_text
from semcl.report.tables import long_table, render, summary
from semcl.report.user_numbers import USER, Overlay, UserNumber, load_numbers
from semcl.store import Store

PAYLOAD = "Table 2\n\\input{/etc/passwd}\r\\write18{rm -rf ~}\u2028<script>alert(1)</script> | =1+1"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def nums(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMCL_NUMBERS", raising=False)
    return tmp_path / "numbers.yaml"


def test_a_source_with_a_line_break_is_refused_by_add_import_and_the_overlay_file(tmp_path, nums):
    code, _, err = _cli("numbers", "add", "rince/tab2", "--row", "RINCE-in", "--column", "top1", "--value", "77.5",
                        "--source", PAYLOAD, "--numbers", str(nums))
    assert code == 2 and err == ("semcl: error: semcl numbers add: key 'source' holds the control character U+000A; "
                                 "one line of text only\n")
    assert not nums.exists()
    sheet = tmp_path / "n.csv"
    with sheet.open("w", newline="") as f:  # a quoted CSV field may hold a line break
        csv.writer(f).writerows([["table", "row", "column", "value", "std", "source"],
                                 ["rince/tab2", "RINCE-in", "top1", "77.5", "", PAYLOAD]])
    code, _, err = _cli("numbers", "import", str(sheet), "--numbers", str(nums))
    assert code == 2 and err == (f"semcl: error: {sheet}: line 2: key 'source' holds the control character U+000A; "
                                 "one line of text only\n")
    assert not nums.exists()
    nums.write_text(yaml.safe_dump({"numbers": [{"table": "rince/tab2", "row": "RINCE-in", "column": "top1",
                                                 "value": 77.5, "std": None, "source": PAYLOAD}]}))
    with pytest.raises(ConfigError, match=r"numbers\[0\]: key 'source' holds the control character U\+000A"):
        load_numbers(nums)


@pytest.mark.parametrize("column, value, std, message", [
    ("top1", "176.5", None, "key 'value' = 176.5 is outside [0, 100], the range of rince/tab2 column 'top1' (linear_probe)"),
    ("top1", "-3", None, "key 'value' = -3 is outside [0, 100], the range of rince/tab2 column 'top1' (linear_probe)"),
    ("top1", "77", "120", "key 'std' = 120 is wider than the range [0, 100] of rince/tab2 column 'top1'"),
    ("top1", "nan", None, "key 'value' = nan is not a finite number"),
])
def test_a_value_outside_its_column_range_is_one_line(nums, column, value, std, message):
    extra = ["--std", std] if std else []
    code, _, err = _cli("numbers", "add", "rince/tab2", "--row", "RINCE-in", "--column", column, "--value", value,
                        *extra, "--source", "T2", "--numbers", str(nums))
    assert code == 2 and err == f"semcl: error: semcl numbers add: {message}\n"
    assert not nums.exists()


def test_a_hand_edited_value_out_of_range_is_not_shown_and_says_why(tmp_path):
    path = tmp_path / "numbers.yaml"
    ov = Overlay(path, [UserNumber("rince/tab2", "RINCE-in", "top1", 176.5, None, "T2")])
    table = ov.apply(get_table("rince/tab2"))
    assert table.row("RINCE-in").reported.get("top1") is None
    assert ov.warnings == [f"{path}: rince/tab2 row 'RINCE-in' column 'top1': key 'value' = 176.5 is outside "
                           "[0, 100], the range of rince/tab2 column 'top1' (linear_probe); not shown"]


def test_every_registry_number_lies_in_its_column_range():
    outside = []
    for table in load_registry().values():
        cols = {c.key: c for c in table.columns}
        for row in table.rows:
            for key, rep in row.reported.items():
                bounds = value_bounds(cols[key])
                for r in (rep, *rep.also) if rep is not None else ():
                    if bounds is not None and not bounds[0] <= r.value <= bounds[1]:
                        outside.append((table.id, row.label, key, r.value))
    assert outside == []


def _evil_table():
    """rince/tab2 with a row label and a user-supplied source that carry every payload (as a registry edit or an
    older overlay could), to show each format escapes what the input checks would have refused."""
    table = get_table("rince/tab2")
    rows = list(table.rows)
    first = rows[0]
    rows[0] = dataclasses.replace(first, reported={**first.reported,
                                                   "top1": Reported(70.0, USER, PAYLOAD)})
    return dataclasses.replace(table, rows=rows), first.label


def test_tex_markdown_and_csv_keep_the_payload_inert(tmp_path):
    table, label = _evil_table()
    summ = summary(table, "mini", long_table(table, "mini", Store(tmp_path)))
    tex = render(table, "mini", summ, "tex")
    lines = tex.splitlines()
    tail = lines[lines.index(r"\end{tabular}") + 1:-1]
    assert tail[0] == "" and all(line.startswith("% ") for line in tail[1:])  # every note stays a comment
    assert not any(line.lstrip().startswith(("\\input", "\\write18")) for line in lines)
    assert any("\\input{/etc/passwd}" in line for line in tail)  # the text is kept, inside its comment
    md = render(table, "mini", summ, "md")
    assert "<script>" not in md and "&lt;script>alert(1)&lt;/script>" in md
    assert not any(line.startswith(("\\input", "\\write18")) for line in md.splitlines())
    assert md_cell("a | b\nc") == r"a \| b c" and md_cell("p < 0.05") == "p < 0.05"
    assert tex_text("50% of a_b {x} \\y ± 1") == r"50\% of a\_b \{x\} \textbackslash{}y $\pm$ 1"


def test_table_csv_writes_a_formula_label_as_text(tmp_path, monkeypatch):
    # a row label "=1+2" (SAFE_LABEL admits it) in a user's own registry: `table --format csv` writes it as text,
    # whatever dtype pandas gives the text column (pandas 3: `str`, which a `dtype == object` test never saw)
    from semcl.locations import registry_root

    reg = tmp_path / "registry"
    shutil.copytree(registry_root() / "presets", reg / "presets")
    (reg / "hsa").mkdir()
    yaml_text = (registry_root() / "hsa" / "abl-components.yaml").read_text()
    (reg / "hsa" / "abl-components.yaml").write_text(yaml_text.replace("{label: MoCo v2,", '{label: "=1+2",'))
    monkeypatch.setenv("SEMCL_REGISTRY", str(reg))  # what --registry sets (restored after the test)
    code, out, err = _cli("--results", str(tmp_path / "res"), "table", "hsa/abl-components", "--profile", "smoke",
                          "--format", "csv")
    assert code == 0, err
    rows = ["'=1+2", "'+ kNN positives", "'+ CutMix between neighbours", "'+ companion losses (CsMl)"]
    assert out.splitlines() == ["row,column,implemented,paper,provenance,mean,std,n,delta,source",
                                *[f"{row},{col},True,,,,,0,," for row in rows for col in ("top1", "top1_last")]]
    written = tmp_path / "res" / "tables" / "hsa_abl-components.smoke.csv"
    assert written.read_text() == out
