"""`semcl figure`: the plotted points come from the same summary as the tables (generated records)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.report.figures import figure_points, write_figure
from semcl.report.scatter_figure import coincident, paper_marks
from semcl.store import Store

TOP1 = {123: 50.0, 546: 52.0, 937: 57.0}  # mean 53, std sqrt(13)
LATENCY = {123: 10.0, 546: 12.0, 937: 11.0}  # mean 11, std 1
NAN = float("nan")


# the paper's (latency ms, top-1) of gpaco/fig1a: the prose's four latencies, and the README top-1 the registry holds
# once (gpaco/imagenet-lt, paco/imagenet-lt) and fig1a shows by reference; NaN = unknown
PAPER = {"CE ResNet-50": (NAN, NAN), "Decouple cRT ResNet-50": (NAN, NAN), "Decouple tau-norm ResNet-50": (NAN, NAN),
         "Decouple LWS ResNet-50": (NAN, NAN), "Balanced Softmax ResNet-50": (NAN, NAN),
         "PaCo ResNet-50": (NAN, 57.0), "PaCo ResNeXt-50 32x4d": (NAN, 58.2), "GPaCo ResNet-50": (NAN, 58.5),
         "RIDE-ResNet (3 experts)": (15.3, NAN), "ResNeXt-50-32x4d (GPaCo)": (13.1, 58.9),
         "RIDE-ResNeXt (3 experts)": (26.0, NAN), "ResNeXt-101-32x4d (GPaCo)": (25.0, 60.8)}


def test_points_are_ours_mean_std_and_the_paper_values(tmp_path):
    t = get_table("gpaco/fig1a")
    store = Store(tmp_path)
    for run in plan_runs(t, "paper"):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            "acc_overall": TOP1[run.seed], "latency_ms": LATENCY[run.seed]}})
    points = figure_points(t, "paper", store).set_index("row")
    assert list(points.index) == list(PAPER)
    for row in t.rows:
        p = points.loc[row.label]
        assert (p.n, p.y_mean, p.x_mean) == (3, pytest.approx(53.0), pytest.approx(11.0))
        assert p.y_std == pytest.approx(math.sqrt(13)) and p.x_std == pytest.approx(1.0)
        assert (p.paper_x, p.paper_y) == pytest.approx(PAPER[row.label], nan_ok=True)
    _, png = write_figure(t, "paper", store)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    back = pd.read_csv(png.with_suffix(".csv")).set_index("row")
    assert back.loc["RIDE-ResNeXt (3 experts)"].paper_x == 26.0 and back.loc["RIDE-ResNeXt (3 experts)"].n == 3


def test_paper_panel_marks_and_the_key_of_coincident_points(tmp_path):
    t = get_table("gpaco/fig1a")
    store = Store(tmp_path)
    marks = paper_marks(figure_points(t, "paper", store))  # no runs: the paper panel alone
    assert marks.to_dict("records") == [
        {"row": "PaCo ResNet-50", "mark": "hline", "x": pytest.approx(NAN, nan_ok=True), "y": 57.0},
        {"row": "PaCo ResNeXt-50 32x4d", "mark": "hline", "x": pytest.approx(NAN, nan_ok=True), "y": 58.2},
        {"row": "GPaCo ResNet-50", "mark": "hline", "x": pytest.approx(NAN, nan_ok=True), "y": 58.5},
        {"row": "RIDE-ResNet (3 experts)", "mark": "vline", "x": 15.3, "y": pytest.approx(NAN, nan_ok=True)},
        {"row": "ResNeXt-50-32x4d (GPaCo)", "mark": "point", "x": 13.1, "y": 58.9},
        {"row": "RIDE-ResNeXt (3 experts)", "mark": "vline", "x": 26.0, "y": pytest.approx(NAN, nan_ok=True)},
        {"row": "ResNeXt-101-32x4d (GPaCo)", "mark": "point", "x": 25.0, "y": 60.8}]
    pts = pd.DataFrame({"row": ["a", "b", "c", "d"], "n": [1, 1, 1, 0], "x_mean": [2.0, 2.0, 3.0, NAN],
                        "y_mean": [5.0, 5.0, 5.0, NAN]})
    assert coincident(pts) == {"b": "a"}  # a row not run has no point to share


def test_figure_entry_is_validated(registry_copy):
    path = registry_copy / "gpaco" / "fig1a.yaml"
    path.write_text(path.read_text().replace("x: latency_ms, y: top1", "x: latency, y: top1"))
    with pytest.raises(ConfigError) as err:
        load_registry()
    assert str(err.value).startswith(str(path)) and "figure: key 'x' = 'latency' is not a column key" in str(err.value)
