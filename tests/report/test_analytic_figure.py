"""`figure: {kind: analytic, ...}` registry entries (RINCE Fig. 4 / Fig. 5): parsed without importing the
function, drawn by write_figure with no runs, the CSV beside the PNG; bad entries name file and key."""

from __future__ import annotations

import csv

import pytest

from semcl.errors import ConfigError
from semcl.registry.tables import get_table, load_registry
from semcl.report.figures import write_figure
from semcl.store import Store

ENTRY = """id: rince/figtest
paper: rince
source: "Figure 5"
title: test
columns: []
rows: []
figure: {kind: analytic, function: gradient_equilibrium.draw_fig5, args: {grid: 5, n_negatives: 16, settings: [[0.1, 0.2]]}}
"""


def test_shipped_entries_are_analytic():
    for fig, fn in (("fig4", "gradient_equilibrium.draw_fig4"), ("fig5", "gradient_equilibrium.draw_fig5")):
        t = get_table(f"rince/{fig}")
        assert t.figure == {"kind": "analytic", "function": fn,
                            "args": {"n_negatives": 16, "positives": "exclusive", "variant_negatives": [4096]}}
        assert t.rows == [] and t.columns == []


def test_analytic_figure_is_drawn_without_runs(registry_copy, tmp_path):
    (registry_copy / "rince" / "figtest.yaml").write_text(ENTRY)
    table = get_table("rince/figtest")
    files, png = write_figure(table, "paper", Store(tmp_path / "results"))
    assert png == tmp_path / "results" / "figures" / "rince_figtest.png" and png.stat().st_size > 0
    assert list(files["file"]) == [str(png), str(png.with_suffix(".csv"))]
    with png.with_suffix(".csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["tau1", "tau2", "s1", "s2_eq"]
    assert [float(r[2]) for r in rows[1:]] == [-1.0, -0.5, 0.0, 0.5, 1.0]  # grid 5 over [-1, 1], one setting


@pytest.mark.parametrize("figure,match", [
    ("{kind: analytic}", "missing key 'function'"),
    ("{kind: analytic, function: draw_fig5}", "is not <module>.<function>"),
    ("{kind: analytic, function: a.b, x: top1}", "unknown key 'x'"),
    ("{kind: analytic, function: a.b, args: [1]}", "'args' must be a mapping"),
    ("{kind: pie}", "one of 'scatter', 'lines', 'analytic', 'tsne', 'similarity_hist'"),
])
def test_bad_analytic_entries(registry_copy, figure, match):
    (registry_copy / "rince" / "figtest.yaml").write_text(ENTRY.rsplit("figure:", 1)[0] + f"figure: {figure}\n")
    with pytest.raises(ConfigError, match=match):
        load_registry()
