"""Paper-vs-ours tables from a results store of generated records."""

from __future__ import annotations

import math

import pytest

from semcl.errors import ResultsError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Reported, get_table
from semcl.report.tables import long_table, render, summary, write_table
from semcl.store import Store

VALUES = {123: 60.0, 546: 62.0, 937: 67.0}  # mean 63, sample std sqrt(13) = 3.6056


def _fill(store: Store, table, profile, skip=()):
    for run in plan_runs(table, profile):
        if (run.row_label, run.seed) in skip:
            continue
        v = VALUES[run.seed]
        metrics = {"linear_top1_last": v, "linear_top1_best": v + 1, "retrieval_fine_R@1": v / 2,
                   "retrieval_fine_AP": v / 4, "retrieval_coarse_R@1": v / 2, "retrieval_coarse_AP": v / 4,
                   "ood_auroc_cifar10": 80.0, "ood_auroc_tinyimagenet": 70.0}
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": metrics})


def test_mean_std_n_and_missing_seed(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    _fill(store, t, "paper", skip={("SCL-in", 937)})
    summ = summary(t, "paper", long_table(t, "paper", store))
    ce = summ[(summ.row == "Cross-entropy") & (summ.column == "top1")].iloc[0]
    assert ce["mean"] == pytest.approx(63.0) and ce["std"] == pytest.approx(math.sqrt(13)) and ce["n"] == 3
    scl = summ[(summ.row == "SCL-in") & (summ.column == "top1")].iloc[0]
    assert scl["n"] == 2 and scl["mean"] == pytest.approx(61.0) and scl["std"] == pytest.approx(math.sqrt(2))
    assert math.isnan(ce["paper"]) and math.isnan(ce["delta"])
    md = render(t, "paper", summ, "md")
    assert "| Cross-entropy | 63.00 ± 3.61 (n=3) |" in md  # no paper value in the table: ours alone
    assert "61.00 ± 1.41 (n=2) |" in md and "/ — / —" not in md
    assert "Cell: ours mean ± sample std (ddof=1) over seeds (n); no paper value is known for this table." in md
    # a row without training code shows as such, with the paper's value where one is known
    seg = get_table("gpaco/seg")  # its UperNet / Swin rows go through exported MMSegmentation configs
    md_seg = render(seg, "paper", summary(seg, "paper", long_table(seg, "paper", store)), "md")
    assert "| GPaCo ADE20K Swin-T (UperNet) | not implemented / 45.40 | not implemented / 46.80 |" in md_seg
    assert "sample std (ddof=1)" in md and "Epoch rule" in md


def test_delta_against_a_reported_value_and_flag(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    _fill(store, t, "paper")
    row = t.row("RINCE-in")
    row.reported["top1"] = Reported(70.0, "user-supplied", "test")  # Δ = -7 > 2 std = 7.21? no
    row.reported["top1_best"] = Reported(75.0, "user-supplied", "test")  # Δ = 64 - 75 = -11 > 7.21
    try:
        summ = summary(t, "paper", long_table(t, "paper", store))
        md = render(t, "paper", summ, "md")
        assert "63.00 ± 3.61 (n=3) / 70.00† / -7.00 |" in md  # † = user-supplied
        assert "64.00 ± 3.61 (n=3) / 75.00† / -11.00* |" in md
        assert "| Cross-entropy | 63.00 ± 3.61 (n=3) / — / — | 64.00 ± 3.61 (n=3) / — / — | 31.50" in md
        assert "user-supplied" in md
    finally:
        row.reported["top1"] = row.reported["top1_best"] = None


def test_formats_are_written(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    _fill(store, t, "mini")
    tex, path = write_table(t, "mini", store, "tex")
    assert path == tmp_path / "tables" / "rince_tab2.mini.tex"
    assert r"\toprule" in tex and r"63.00 $\pm$ 3.61 (n=3)" in tex
    csv, _ = write_table(t, "mini", store, "csv")
    assert csv.splitlines()[0] == "row,column,implemented,paper,provenance,mean,std,n,delta,source"
    md, _ = write_table(t, "mini", store, "md")
    assert "OOD set cifar10 replaced by mnist" in md and "OOD set tinyimagenet not measured" in md


def test_truncated_record_stops_the_table(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    run = plan_runs(t, "paper")[0]
    store.metrics_path(run.run_id).parent.mkdir(parents=True)
    store.metrics_path(run.run_id).write_text("{")
    with pytest.raises(ResultsError, match="metrics.json: truncated or invalid JSON"):
        long_table(t, "paper", store)
