"""`semcl numbers`: the user's paper numbers in an overlay file, shown as user-supplied (never in a run id)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.user_numbers import Overlay, UserNumber, load_numbers, overlay_path

RIDE = "RIDE-ResNet (3 experts)"  # gpaco/fig1a: the registry has its latency (15.3, paper-prose), no top-1 (others do)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def nums(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMCL_NUMBERS", raising=False)
    return tmp_path / "my-numbers.yaml"


def test_add_list_remove_and_the_file(tmp_path, nums):
    code, out, _ = _cli("numbers", "add", "rince/tab2", "--row", "RINCE-in", "--column", "Top-1", "--value", "77.5",
                        "--std", "0.2", "--source", "RINCE paper, Table 2", "--numbers", str(nums))
    assert code == 0 and out == "added: rince/tab2 row 'RINCE-in' column 'top1': 77.5 ± 0.2 (RINCE paper, Table 2)\n"
    assert yaml.safe_load(nums.read_text()) == {"numbers": [{
        "table": "rince/tab2", "row": "RINCE-in", "column": "top1", "value": 77.5, "std": 0.2,
        "source": "RINCE paper, Table 2", "override": False}]}
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temp file and a rename
    code, out, _ = _cli("numbers", "list", "--numbers", str(nums))
    assert out == "rince/tab2  'RINCE-in'  top1  77.5 ± 0.2  source: RINCE paper, Table 2\n"
    code, out, _ = _cli("numbers", "remove", "rince/tab2", "--row", "RINCE-in", "--column", "top1", "--numbers", str(nums))
    assert code == 0 and load_numbers(nums) == []
    code, _, err = _cli("numbers", "remove", "rince/tab2", "--row", "RINCE-in", "--column", "top1", "--numbers", str(nums))
    assert code == 2 and err == f"semcl: error: {nums}: no user number for rince/tab2 row 'RINCE-in' column 'top1'\n"


@pytest.mark.parametrize("argv, message", [
    (["rince/tabX", "--row", "RINCE-in", "--column", "top1"], "unknown table 'rince/tabX'; did you mean "),
    (["rince/tab2", "--row", "Nope", "--column", "top1"], "semcl numbers add: table rince/tab2 has no row 'Nope' (rows: "),
    (["rince/tab2", "--row", "RINCE-in", "--column", "zzz"],
     "semcl numbers add: table rince/tab2 has no column 'zzz' (columns: top1, top1_best, "),
])
def test_unknown_table_row_or_column_is_one_line(nums, argv, message):
    code, _, err = _cli("numbers", "add", *argv, "--value", "1", "--source", "x", "--numbers", str(nums))
    assert code == 2 and err.startswith(f"semcl: error: {message}") and err.count("\n") == 1
    assert not nums.exists()


def test_a_registry_value_is_overridden_only_with_force(tmp_path, nums, monkeypatch):
    monkeypatch.setenv("SEMCL_NUMBERS", str(nums))  # the environment names the file
    add = ["numbers", "add", "gpaco/fig1a", "--row", RIDE, "--column", "latency_ms", "--value", "16", "--source", "PDF"]
    code, _, err = _cli(*add)
    assert code == 2 and "has a registry value 15.3 [paper-prose]" in err and "pass --force to override it" in err
    assert not nums.exists()
    code, out, _ = _cli(*add, "--force")
    assert code == 0 and out.endswith("; overrides the registry's 15.3 [paper-prose]\n")
    code, out, _ = _cli("--results", str(tmp_path), "table", "gpaco/fig1a", "--profile", "paper")
    assert f"| {RIDE} | — / — / — | — / 16.00† / — |" in out  # Top-1: the column has paper values, not this row
    assert (f"- † {RIDE} / Latency (ms): user-supplied paper value, source: PDF; overrides the registry's 15.3 "
            "[paper-prose]") in out
    _, out, _ = _cli("show", "gpaco/fig1a")
    assert "      reported latency_ms: 16.0 [user-supplied] PDF\n        overrides the registry's 15.3 [paper-prose]" in out
    # an entry without `override` on a cell the registry fills is not shown, and says so
    nums.write_text(nums.read_text().replace("override: true", "override: false"))
    code, out, err = _cli("--results", str(tmp_path), "table", "gpaco/fig1a", "--profile", "paper")
    assert "— / 15.30 / —" in out and "not shown, the registry has 15.3 [paper-prose]" in err


def test_import_csv_checks_every_line_before_writing(tmp_path, nums):
    good = tmp_path / "n.csv"
    good.write_text("table,row,column,value,std,source\nrince/tab2,SCL-in,top1,76.5,,Table 2\n"
                    "rince/tab2,RINCE-in,top1,77.5,0.3,Table 2\n")
    code, out, _ = _cli("numbers", "import", str(good), "--numbers", str(nums))
    assert code == 0 and out.count("added: ") == 2
    assert [(n.row, n.value, n.std) for n in load_numbers(nums)] == [("RINCE-in", 77.5, 0.3), ("SCL-in", 76.5, None)]
    bad = tmp_path / "bad.csv"
    bad.write_text("table,row,column,value,std,source\nrince/tab2,Cross-entropy,top1,70,,T2\nrince/tab2,SCL-in,top1,abc,,T2\n")
    before = nums.read_text()
    code, _, err = _cli("numbers", "import", str(bad), "--numbers", str(nums))
    assert code == 2 and err == f"semcl: error: {bad}: line 3: key 'value' = 'abc' is not a number\n"
    assert nums.read_text() == before  # nothing of the bad file was written
    bad.write_text("table,row,column,value,source,page\n")
    assert _cli("numbers", "import", str(bad), "--numbers", str(nums))[2] == (
        f"semcl: error: {bad}: line 1: columns must be table,row,column,value,std,source (unknown 'page')\n")


def test_overlay_never_changes_run_ids_and_claims_show_the_paper_difference(tmp_path, nums):
    t = get_table("rince/tab2")
    ov = Overlay(nums, [UserNumber("rince/tab2", "RINCE-in", "top1", 77.5, None, "T2"),
                        UserNumber("rince/tab2", "SCL-in", "top1", 76.25, None, "T2")])
    with_numbers = ov.apply(t)
    assert with_numbers.row("RINCE-in").reported["top1"].provenance == "user-supplied"
    assert t.row("RINCE-in").reported["top1"] is None  # the registry's table is untouched
    assert [r.run_id for r in plan_runs(with_numbers, "smoke")] == [r.run_id for r in plan_runs(t, "smoke")]
    from semcl.report.user_numbers import save_numbers

    save_numbers(nums, ov.numbers)
    code, out, _ = _cli("--results", str(tmp_path), "claims", "rince", "--profile", "smoke", "--numbers", str(nums))
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("| `abs-in-top1` |"))
    assert "| — (+1.25†) |" in line
    assert ("- `abs-in-top1`: † paper Δ from the paper values RINCE-in: 77.5 [user-supplied] (T2); "
            "SCL-in: 76.25 [user-supplied] (T2)") in out
    code, out, _ = _cli("--results", str(tmp_path), "report", "rince", "--profile", "smoke", "--numbers", str(nums))
    assert code == 0 and "| `rince/tab2` | Table 2 |" in out and "(+1.25†)" in out


def test_malformed_overlay_is_one_line_naming_file_and_key(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_text("numbers:\n- {table: rince/tab2, row: RINCE-in, column: top1, value: high, source: x}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: numbers\[0\]: key 'value' = 'high' is not a finite number$"):
        load_numbers(path)
    assert overlay_path(None, tmp_path) == tmp_path / "numbers.yaml"


def test_a_template_lists_every_blank_cell_and_round_trips_through_import(tmp_path):
    table = get_table("rince/tab2")
    code, out, _ = _cli("numbers", "template", "rince/tab2")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "table,row,column,value,std,source"
    # RINCE's tables have no registry number: every row x column is a blank cell, in table order
    cells = [(r.label, c.key) for r in table.rows for c in table.columns]
    assert len(lines) == 1 + len(cells)
    assert lines[1] == f"rince/tab2,{cells[0][0]},{cells[0][1]},,,"
    blank = tmp_path / "t.csv"
    blank.write_text(out)
    numbers = tmp_path / "numbers.yaml"
    code, _, err = _cli("numbers", "import", str(blank), "--numbers", str(numbers))
    assert code == 0 and "every cell blank; nothing written" in err and not numbers.exists()
    filled = out.replace(f"rince/tab2,{cells[0][0]},{cells[0][1]},,,",
                         f'rince/tab2,{cells[0][0]},{cells[0][1]},71.5,0.2,"RINCE, Table 2, p. 6"')
    blank.write_text(filled)
    code, _, _ = _cli("numbers", "import", str(blank), "--numbers", str(numbers))
    got = load_numbers(numbers)
    assert code == 0 and [(n.row, n.column, n.value, n.std, n.source) for n in got] == [
        (cells[0][0], cells[0][1], 71.5, 0.2, "RINCE, Table 2, p. 6")]


def test_a_template_leaves_out_the_cells_the_registry_fills():
    table = get_table("gpaco/abl-crop")
    code, out, _ = _cli("numbers", "template", "gpaco/abl-crop")
    known = sum(1 for r in table.rows for c in table.columns if r.reported.get(c.key) is not None)
    assert code == 0 and known > 0
    assert len(out.splitlines()) - 1 == len(table.rows) * len(table.columns) - known
