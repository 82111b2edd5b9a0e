"""Table cells show only the parts that exist: "/ paper / Δ" only in columns with a paper value."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

from semcl.cli.main import main
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.tables import cell_legend, long_table, render, summary
from semcl.report.user_numbers import Overlay, UserNumber
from semcl.store import Store

TOP1 = {123: 60.0, 546: 62.0, 937: 67.0}  # mean 63, sample std sqrt(13) = 3.61


def _table_with(values: dict[str, float]):
    """rince/tab2 with user paper values for RINCE-in in the given columns."""
    nums = [UserNumber("rince/tab2", "RINCE-in", key, v, None, "test") for key, v in values.items()]
    return Overlay(None, nums).apply(get_table("rince/tab2"))


def _md(table, tmp_path) -> str:
    store = Store(tmp_path)
    for run in plan_runs(table, "paper"):
        if run.row_label in ("RINCE-in", "SCL-in"):
            write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
                "linear_top1_last": TOP1[run.seed], "retrieval_fine_R@1": TOP1[run.seed] / 2}})
    return render(table, "paper", summary(table, "paper", long_table(table, "paper", store)), "md")


def test_only_columns_with_a_paper_value_show_paper_and_delta(tmp_path):
    t = _table_with({"top1": 70.0})
    md = _md(t, tmp_path)
    # Top-1 has a paper value (RINCE-in's): every cell of it has three parts; R@1 fine has none: ours alone
    rest = " | — | 31.50 ± 1.80 (n=3) |" + " — |" * 6
    assert "| RINCE-in | 63.00 ± 3.61 (n=3) / 70.00† / -7.00" + rest in md
    assert "| SCL-in | 63.00 ± 3.61 (n=3) / — / —" + rest in md
    assert ("- Cell: ours mean ± sample std (ddof=1) over seeds (n) / paper / Δ = ours − paper; * marks |Δ| > 2 std, "
            "in the columns with a paper value (Top-1); ours mean ± sample std (ddof=1) over seeds (n) alone in the "
            "others (no paper value known). — = unknown or not run.") in md


def test_the_legend_follows_the_parts_shown():
    t = get_table("rince/tab2")
    assert cell_legend(t, None) == ("Cell: ours mean ± sample std (ddof=1) over seeds (n); no paper value is known "
                                    "for this table. — = not run.")
    every = _table_with({c.key: 1.0 for c in t.columns})
    assert cell_legend(every, None) == ("Cell: ours mean ± sample std (ddof=1) over seeds (n) / paper / Δ = ours − "
                                        "paper; * marks |Δ| > 2 std. — = unknown or not run.")


def test_report_writes_under_the_results_folder_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a stray write to ./reproduce would land here
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--results", str(tmp_path / "res"), "report", "hsa", "--profile", "smoke"])
    assert code == 0 and err.getvalue().endswith(f"(written to {tmp_path / 'res' / 'reports' / 'hsa.smoke.md'})\n")
    assert (tmp_path / "res" / "reports" / "hsa.smoke.md").read_text() == out.getvalue()
    assert not (tmp_path / "reproduce").exists()
