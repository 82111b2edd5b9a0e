"""RINCE Fig. 6: the video retrieval runs' PR-curve files -> mean curves per row and data set."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.curve_figures import CURVE_FILES
from semcl.report.figures import write_figure
from semcl.store import Store


def _curve(path, recall, precision):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"cutoff": np.arange(1, len(recall) + 1), "recall": recall, "precision": precision}).to_csv(
        path, index=False)


def test_fig6_shares_table4_runs():
    fig = {(r.row_label, r.run_id) for r in plan_runs(get_table("rince/fig6"), "paper")}
    tab = {(r.row_label, r.run_id) for r in plan_runs(get_table("rince/tab4"), "paper")}
    assert len(fig) == 8 * 3 and fig <= tab  # 8 rows x the paper's 3 seeds


def test_fig6_mean_curve_over_seeds_and_panels(tmp_path):
    table = get_table("rince/fig6")
    store = Store(tmp_path)
    runs = [r for r in plan_runs(table, "smoke") if r.row_label in ("RINCE", "RINCE HMDB51 retrieval")]
    assert len(runs) == 2
    pre, hmdb = runs if runs[0].row_label == "RINCE" else runs[::-1]
    _curve(store.run_dir(pre.run_id) / CURVE_FILES["pr_curve"], [0.25, 0.5, 1.0], [1.0, 0.5, 0.5])
    _curve(store.run_dir(hmdb.run_id) / CURVE_FILES["pr_curve"], [0.5, 1.0], [1.0, 0.75])
    summary, png = write_figure(table, "smoke", store, tmp_path / "fig")
    assert png.exists()
    data = pd.read_csv(png.with_suffix(".csv"))
    assert set(data["dataset"]) == {"ucf101", "hmdb51"}  # the smoke profile keeps the paper's data sets
    s = summary.set_index("row")
    # AP = sum_{i>=2} (R_i - R_{i-1}) P_i: 0.25 * 0.5 + 0.5 * 0.5 = 0.375; 0.5 * 0.75 = 0.375
    assert s.loc["RINCE", "AP"] == pytest.approx(0.375) and s.loc["RINCE", "n"] == 1
    assert s.loc["RINCE HMDB51 retrieval", "AP"] == pytest.approx(0.375)


def test_curve_mean_and_std_over_two_seeds(tmp_path, monkeypatch):
    import semcl.report.curve_figures as cf

    table = get_table("rince/fig6")
    store = Store(tmp_path)
    run = next(r for r in plan_runs(table, "smoke") if r.row_label == "HN")
    other = tmp_path / "seed2"
    _curve(store.run_dir(run.run_id) / CURVE_FILES["pr_curve"], [0.5, 1.0], [1.0, 0.5])
    _curve(other / CURVE_FILES["pr_curve"], [0.5, 1.0], [0.5, 0.5])
    second = dataclasses.replace(run, run_id="seed2", seed=546)
    monkeypatch.setattr(cf, "plan_runs", lambda t, p: [run, second] if p == "smoke" else plan_runs(t, p))
    monkeypatch.setattr(store, "run_dir", lambda rid: other if rid == "seed2" else tmp_path / "runs" / rid)
    data = cf.curve_points(table, "smoke", store)
    assert data["precision"].tolist() == pytest.approx([0.75, 0.5])
    assert data["precision_std"].tolist() == pytest.approx([np.std([1.0, 0.5], ddof=1), 0.0])
    assert set(data["n"]) == {2}


def test_fig6_without_runs_names_the_command(tmp_path):
    with pytest.raises(ValueError, match="wrote video_pr_curve.csv; run it first: semcl run rince/fig6"):
        write_figure(get_table("rince/fig6"), "smoke", Store(tmp_path), tmp_path / "fig")


def test_truncated_curve_file_is_named(tmp_path):
    from semcl.report.curve_figures import read_curve

    bad = tmp_path / "video_pr_curve.csv"
    bad.write_text("cutoff,recall\n1,0.5\n")
    with pytest.raises(ValueError, match=f"{bad}: key 'precision' missing"):
        read_curve(bad)


def test_unknown_figure_kind_lists_pr_curve(tmp_path):
    from semcl.registry.figure_kinds import check_figure  # the validator the loader calls

    with pytest.raises(ConfigError, match="'pr_curve'"):
        check_figure({"kind": "roc"}, ["r1"], "fig.yaml")
