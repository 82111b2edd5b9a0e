"""`semcl figure`: the plotted points come from the same summary as the tables (generated records)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.tables import get_table, load_registry
from semcl.report.figures import figure_points, write_figure
from semcl.runs import Store, plan_runs

TOP1 = {123: 50.0, 546: 52.0, 937: 57.0}  # mean 53, std sqrt(13)
LATENCY = {123: 10.0, 546: 12.0, 937: 11.0}  # mean 11, std 1


def test_points_are_ours_mean_std_and_the_paper_values(tmp_path):
    t = get_table("gpaco/fig1a")
    store = Store(tmp_path)
    for run in plan_runs(t, "paper"):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            "acc_overall": TOP1[run.seed], "latency_ms": LATENCY[run.seed]}})
    points = figure_points(t, "paper", store).set_index("row")
    for row in t.rows:
        p = points.loc[row.label]
        assert (p.n, p.y_mean, p.x_mean) == (3, pytest.approx(53.0), pytest.approx(11.0))
        assert p.y_std == pytest.approx(math.sqrt(13)) and p.x_std == pytest.approx(1.0)
        assert math.isnan(p.paper_y)  # the plotted accuracies are unknown
    assert points.loc["RIDE-ResNet (3 experts)"].paper_x == 15.3
    assert points.loc["ResNeXt-101-32x4d (GPaCo)"].paper_x == 25.0
    _, png = write_figure(t, "paper", store)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    back = pd.read_csv(png.with_suffix(".csv")).set_index("row")
    assert back.loc["RIDE-ResNeXt (3 experts)"].paper_x == 26.0 and back.loc["RIDE-ResNeXt (3 experts)"].n == 3


def test_figure_entry_is_validated(registry_copy):
    path = registry_copy / "gpaco" / "fig1a.yaml"
    path.write_text(path.read_text().replace("x: latency_ms, y: top1", "x: latency, y: top1"))
    with pytest.raises(ConfigError) as err:
        load_registry()
    assert str(err.value).startswith(str(path)) and "figure: key 'x' = 'latency' is not a column key" in str(err.value)
