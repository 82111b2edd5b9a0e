"""`semcl curves`: per row and epoch, the mean and the min–max band (and sample std) over the seeds' histories,
from history.jsonl while a run trains or metrics.json's history once it has finished."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout

import pandas as pd
import pytest

from semcl.cli.main import main
from semcl.errors import ConfigError, ResultsError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.curves import history_curves
from semcl.runtime.history import HISTORY_FILE, append_entry
from semcl.store import Store


def _fabricate(tmp_path) -> tuple[Store, list]:
    """Row Cross-entropy: seed A (3 epochs, in history.jsonl plus a torn line), seed B (2 epochs, finished: only
    metrics.json's history); row Triplet: one seed, one epoch."""
    store = Store(tmp_path / "results")
    runs = plan_runs(get_table("rince/tab2"), "smoke")
    ce = [r for r in runs if r.row_label == "Cross-entropy"][:2]
    tri = next(r for r in runs if r.row_label == "Triplet")
    for run, losses in ((ce[0], [4.0, 3.0, 2.5]), (tri, [5.0])):
        folder = store.run_dir(run.run_id)
        folder.mkdir(parents=True)
        for epoch, loss in enumerate(losses, 1):
            append_entry(folder / HISTORY_FILE, {"epoch": epoch, "loss": loss, "lr": 0.1})
    with open(store.run_dir(ce[0].run_id) / HISTORY_FILE, "a") as f:
        f.write('{"epoch": 4, "lo')
    folder = store.run_dir(ce[1].run_id)
    folder.mkdir(parents=True)
    record = {"run_id": ce[1].run_id, "seed": ce[1].seed, "metrics": {},
              "history": [{"epoch": 1, "loss": 3.0, "lr": 0.1}, {"epoch": 2, "loss": 2.0, "lr": 0.1}]}
    (folder / "metrics.json").write_text(json.dumps(record))
    return store, ce


def test_curves_are_the_mean_and_band_over_seeds(tmp_path):
    store, _ = _fabricate(tmp_path)
    data = history_curves(get_table("rince/tab2"), "smoke", store)
    ce = data[data.row == "Cross-entropy"].reset_index(drop=True)
    assert ce.epoch.tolist() == [1, 2, 3] and ce.n.tolist() == [2, 2, 1]
    assert ce["mean"].tolist() == [3.5, 2.5, 2.5]
    assert ce["min"].tolist() == [3.0, 2.0, 2.5] and ce["max"].tolist() == [4.0, 3.0, 2.5]
    assert ce["std"][:2].tolist() == pytest.approx([math.sqrt(0.5)] * 2) and math.isnan(ce["std"][2])
    tri = data[data.row == "Triplet"]
    assert tri[["epoch", "mean", "n"]].values.tolist() == [[1, 5.0, 1]]
    assert history_curves(get_table("rince/tab2"), "smoke", store, rows="^Trip").row.unique().tolist() == ["Triplet"]
    with pytest.raises(ConfigError, match="matches --rows"):
        history_curves(get_table("rince/tab2"), "smoke", store, rows="^nothing$")
    with pytest.raises(ResultsError, match="key 'acc'"):
        history_curves(get_table("rince/tab2"), "smoke", store, metric="acc")


def test_cli_writes_png_and_csv(tmp_path):
    store, _ = _fabricate(tmp_path)
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["--results", str(store.root), "curves", "rince/tab2", "--profile", "smoke",
                     "--rows", "Cross-entropy", "--out", str(tmp_path / "fig")])
    assert code == 0 and "Cross-entropy" in out.getvalue()
    csv = pd.read_csv(tmp_path / "fig" / "rince_tab2.smoke.loss.csv")
    assert csv[["epoch", "mean", "min", "max", "n"]].values.tolist() == [[1, 3.5, 3.0, 4.0, 2], [2, 2.5, 2.0, 3.0, 2],
                                                                         [3, 2.5, 2.5, 2.5, 1]]
    png = (tmp_path / "fig" / "rince_tab2.smoke.loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_a_diverged_seed_is_counted_apart_and_said(tmp_path):
    store = Store(tmp_path / "results")
    runs = [r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "Cross-entropy"][:3]
    for run, losses in zip(runs, ([4.0, 3.0], [3.0, float("nan")], [5.0, float("inf")]), strict=True):
        folder = store.run_dir(run.run_id)
        folder.mkdir(parents=True)
        for epoch, loss in enumerate(losses, 1):
            append_entry(folder / HISTORY_FILE, {"epoch": epoch, "loss": loss})
    data = history_curves(get_table("rince/tab2"), "smoke", store)
    assert data[["epoch", "mean", "min", "max", "n", "nonfinite"]].values.tolist() == [
        [1, 4.0, 3.0, 5.0, 3, 0], [2, 3.0, 3.0, 3.0, 1, 2]]
    err = io.StringIO()
    from contextlib import redirect_stderr

    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        assert main(["--results", str(store.root), "curves", "rince/tab2", "--profile", "smoke",
                     "--out", str(tmp_path / "fig")]) == 0
    assert err.getvalue().splitlines()[0] == ("semcl: Cross-entropy: 2 seed(s) with a NaN or inf loss, first at epoch "
                                              "2; the curve averages the finite seeds (n)")


def test_the_curves_csv_writes_a_formula_like_row_label_as_text(tmp_path):
    store = Store(tmp_path / "results")
    run = next(r for r in plan_runs(get_table("hsa/abl-components"), "smoke") if r.row_label == "+ kNN positives")
    folder = store.run_dir(run.run_id)
    folder.mkdir(parents=True)
    append_entry(folder / HISTORY_FILE, {"epoch": 1, "loss": -0.5, "lr": 0.1})
    with redirect_stdout(io.StringIO()):
        code = main(["--results", str(store.root), "curves", "hsa/abl-components", "--profile", "smoke",
                     "--rows", "kNN", "--out", str(tmp_path / "fig")])
    assert code == 0
    text = (tmp_path / "fig" / "hsa_abl-components.smoke.loss.csv").read_text()
    assert text == "row,epoch,mean,std,min,max,n,nonfinite\n'+ kNN positives,1,-0.5,,-0.5,-0.5,1,0\n"
