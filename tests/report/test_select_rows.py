"""Rows that select another table's row by a criterion (Table 2's Two heads / Label smoothing)."""

from __future__ import annotations

import pytest

from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_registry
from semcl.report.tables import long_table, render, select_row, summary
from semcl.store import Store

COLS = """columns:
  - {key: top1, label: "Top-1", eval: linear_probe, epoch: last}
  - {key: r1, label: "R@1", eval: retrieval, labels: fine, measure: "R@1"}
"""
GRID = """id: t/grid
paper: t
source: "Table 10"
title: grid
seeds: [1, 2]
""" + COLS + """rows:
  - {label: lambda = 0.1, method: two_heads, overrides: {method.weight: 0.1}}
  - {label: lambda = 0.3, method: two_heads, overrides: {method.weight: 0.3}}
  - {label: lambda = 0.5, method: two_heads, overrides: {method.weight: 0.5}}
"""
MAIN = """id: t/main
paper: t
source: "Table 2"
title: main
seeds: [1, 2]
""" + COLS + """rows:
  - {label: CE, method: ce}
  - {label: Two heads, method: two_heads, select: {table: t/grid, column: top1, best: SELECT_BEST}}
"""
# hand-made top-1 per (row, seed); means 0.1: 61, 0.3: 65, 0.5: 63
TOP1 = {("lambda = 0.1", 1): 60.0, ("lambda = 0.1", 2): 62.0, ("lambda = 0.3", 1): 66.0,
        ("lambda = 0.3", 2): 64.0, ("lambda = 0.5", 1): 63.0, ("lambda = 0.5", 2): 63.0,
        ("CE", 1): 50.0, ("CE", 2): 52.0}


def _registry(tmp_path, best="max", main=MAIN):
    root = tmp_path / "reg"
    (root / "t").mkdir(parents=True)
    (root / "t" / "grid.yaml").write_text(GRID)
    (root / "t" / "main.yaml").write_text(main.replace("SELECT_BEST", best))
    return load_registry(root)


def _fill(store, table):
    for run in plan_runs(table, "paper"):
        top1 = TOP1[(run.row_label, run.seed)]
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            "linear_top1_last": top1, "retrieval_fine_R@1": top1 / 2}})


@pytest.mark.parametrize(("best", "chosen", "top1", "r1"), [("max", "lambda = 0.3", 65.0, 32.5),
                                                              ("min", "lambda = 0.1", 61.0, 30.5)])
def test_select_row_takes_every_cell_of_the_best_grid_row(tmp_path, best, chosen, top1, r1):
    tables = _registry(tmp_path, best)
    main, grid = tables["t/main"], tables["t/grid"]
    # no runs of its own: only CE's two seeds are planned
    assert [r.row_label for r in plan_runs(main, "paper")] == ["CE", "CE"]
    store = Store(tmp_path / "res")
    _fill(store, grid)
    _fill(store, main)
    summ = summary(main, "paper", long_table(main, "paper", store)).set_index(["row", "column"])
    assert summ.loc[("Two heads", "top1"), "mean"] == pytest.approx(top1)
    assert summ.loc[("Two heads", "r1"), "mean"] == pytest.approx(r1)
    assert summ.loc[("Two heads", "top1"), "n"] == 2
    assert summ.loc[("Two heads", "top1"), "source"] == f"t/grid: {chosen}"
    md = render(main, "paper", summ.reset_index(), "md")
    crit = "largest" if best == "max" else "smallest"
    assert f"- Row Two heads: the row of t/grid with the {crit} mean Top-1; chosen: '{chosen}'" in md
    assert f"| Two heads | {top1:.2f} ± 1.41 (n=2) |" in md  # no paper value in the table: ours alone


def test_select_note_without_runs(tmp_path):
    main = _registry(tmp_path)["t/main"]
    summ = summary(main, "paper", long_table(main, "paper", Store(tmp_path / "empty")))
    assert "no run of t/grid has finished in profile paper" in render(main, "paper", summ, "md")


def test_select_row_helper_ties_and_empty():
    import pandas as pd

    long = pd.DataFrame({"row": ["a", "a", "b", "c"], "column": ["x", "x", "x", "y"],
                         "value": [1.0, 3.0, 2.0, 9.0]})
    assert select_row(long, "x", "max") == "a"  # tie 2.0 = 2.0: the first in order
    assert select_row(long, "y", "min") == "c"
    assert select_row(long, "z", "max") is None


@pytest.mark.parametrize(("old", "new", "message"), [
    ("table: t/grid", "table: t/none", "key 'table' = 't/none' is no table of the registry"),
    ("best: SELECT_BEST", "best: mean", "'rows\\[1\\].select.best' = 'mean' is not 'max' or 'min'"),
    ("column: top1", "column: ap", "'select.column' = 'ap' is not a column key of this table"),
    ("select: {", "overrides: {method.weight: 0.1}, select: {", "key 'select' excludes key 'overrides'"),
])
def test_bad_select_is_a_one_line_error(tmp_path, old, new, message):
    with pytest.raises(ConfigError, match=message):
        _registry(tmp_path, main=MAIN.replace(old, new))
