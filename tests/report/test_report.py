"""`semcl report`: one page per paper from generated run records."""

from __future__ import annotations

import pytest

from semcl.cli.main import main
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.report.reproduction import build_report
from semcl.store import Store

TOP1 = {123: 60.0, 546: 62.0, 937: 67.0}  # mean 63, sample std 3.61


def test_report_lists_every_table_and_renders_those_with_runs(tmp_path):
    store = Store(tmp_path / "results")
    fig = get_table("gpaco/fig1a")
    for run in plan_runs(fig, "paper"):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            "acc_overall": TOP1[run.seed], "latency_ms": 10.0 + run.seed / 1000}})
    text, path = build_report("gpaco", "paper", store, tmp_path / "reproduce")
    assert path == tmp_path / "reproduce" / "gpaco.paper.md" and path.read_text() == text
    rows = {ln.split("|")[1].strip(): ln for ln in text.splitlines() if ln.startswith("| `gpaco/")}
    assert len(rows) == sum(t.paper == "gpaco" for t in load_registry().values())  # every gpaco entry
    # 4 paper latencies (all 4 off by > 2 std) and 5 README top-1 shown by reference (within 2 std of 63 ± 3.61)
    assert "| 12/12 | 36/36 | 9 | 4 |" in rows["`gpaco/fig1a`"]
    assert "| 12/12 | 0/36 | 5 | — |" in rows["`gpaco/tab2`"]
    assert "## `gpaco/fig1a`" in text and "## `gpaco/tab2`" not in text  # only tables with runs
    assert "63.00 ± 3.61 (n=3)" in text
    assert "![gpaco/fig1a](figures/gpaco_fig1a.paper.png)" in text
    assert (tmp_path / "reproduce" / "figures" / "gpaco_fig1a.paper.png").exists()


def test_unknown_paper_is_a_one_line_error(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "report", "simclr", "--out", str(tmp_path / "r")]) == 2
    papers = ", ".join(sorted({t.paper for t in load_registry().values()}))
    assert capsys.readouterr().err == f"semcl: error: no registry entry has paper 'simclr' (papers: {papers})\n"


@pytest.mark.parametrize("profile", ["mini"])
def test_tables_without_the_profile_are_listed_not_rendered(tmp_path, profile):
    text, _ = build_report("paco", profile, Store(tmp_path), tmp_path / "r")
    assert "| `paco/full-imagenet` | Full ImageNet table (no. unknown) | 4/4 | no `mini` profile |" in text
