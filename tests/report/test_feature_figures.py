"""RINCE Fig. 2/7/8: saved test features -> t-SNE panels and similarity histograms by rank."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from semcl.evals.protocols.features import FEATURES_FILE, run
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.feature_figures import (
    colour_key,
    group_colours,
    group_names,
    histograms,
    rank_similarities,
    tsne_embedding,
    x_range,
)
from semcl.report.figures import write_figure
from semcl.store import Store

R = 1 / math.sqrt(2)
# 4 points: classes 0, 0, 1, 2; superclasses 0, 0, 0, 1
F = np.array([[1.0, 0, 0], [2.0, 0, 0], [1.0, 1.0, 0], [0, 1.0, 0]])
Y, C = np.array([0, 0, 1, 2]), np.array([0, 0, 0, 1])


def test_rank_similarities_by_hand():
    s = rank_similarities(F, Y, C)
    assert s["same class"] == pytest.approx([1.0])  # (0, 1)
    assert s["same superclass"] == pytest.approx([R, R])  # (0, 2), (1, 2)
    assert sorted(s["other"]) == pytest.approx([0.0, 0.0, R])  # (0, 3), (1, 3), (2, 3)
    no_coarse = rank_similarities(F, Y, None)
    assert len(no_coarse["same superclass"]) == 0 and len(no_coarse["other"]) == 5


def test_histogram_counts_and_density():
    h = histograms(rank_similarities(F, Y, C), bins=4)  # bins [-1,-.5), [-.5,0), [0,.5), [.5,1]
    other = h[h["rank"] == "other"]
    assert other["count"].tolist() == [0, 0, 2, 1]
    assert other["density"].tolist() == pytest.approx([0, 0, 2 / 3 / 0.5, 1 / 3 / 0.5])
    assert h[h["rank"] == "same class"]["count"].tolist() == [0, 0, 0, 1]  # 1.0 falls in the closed last bin
    for rank in ("same class", "same superclass", "other"):
        part = h[h["rank"] == rank]
        assert (part["density"] * (part["bin_hi"] - part["bin_lo"])).sum() == pytest.approx(1.0)


def test_tsne_keeps_two_far_clusters_apart():
    g = np.random.default_rng(0)
    f = np.concatenate([g.normal(0, 0.05, (15, 6)) + np.eye(6)[0], g.normal(0, 0.05, (15, 6)) + np.eye(6)[1]])
    xy = tsne_embedding(f, perplexity=5, seed=0)
    d = ((xy[:, None] - xy[None]) ** 2).sum(-1) + np.eye(30) * 1e9
    nearest = d.argmin(1)
    assert ((nearest < 15) == (np.arange(30) < 15)).all()  # every point's 2-D neighbour is of its cluster


def test_features_evaluation_writes_float16_file(tmp_path):
    test = SimpleNamespace(labels=torch.tensor([0, 1]), coarse_labels=torch.tensor([0, 0]), class_names=["a", "b"],
                           coarse_names=["s"])
    ctx = SimpleNamespace(logits_path=tmp_path / "logits.pt", test=test, save=None,
                          test_features=torch.tensor([[0.5, 1.0], [2.0, -1.0]]))
    assert run(ctx) == {"test_features_saved": 2.0}
    d = torch.load(tmp_path / FEATURES_FILE, weights_only=True)
    assert d["features"].dtype == torch.float16 and d["features"].tolist() == [[0.5, 1.0], [2.0, -1.0]]
    assert d["labels"].tolist() == [0, 1] and d["coarse"].tolist() == [0, 0] and d["coarse_names"] == ["s"]


def _save(path: Path, features: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"features": torch.tensor(features, dtype=torch.float16), "labels": torch.tensor(Y),
                "coarse": torch.tensor(C), "class_names": ["a", "b", "c"], "coarse_names": ["s", "t"]}, path)


def test_fig7_from_saved_features(tmp_path):
    table = get_table("rince/fig7")
    store = Store(tmp_path)
    runs = plan_runs(table, "smoke")
    assert [r.row_label for r in runs] == ["SCL-out", "RINCE-out-in"]
    _save(store.run_dir(runs[0].run_id) / FEATURES_FILE, F)
    _save(store.run_dir(runs[1].run_id) / FEATURES_FILE, np.eye(4)[:, :3])  # the 4th row is zero: normalised safely
    summ, png = write_figure(table, "smoke", store, tmp_path / "fig")
    assert png.exists() and png.with_suffix(".csv").exists()
    data = pd.read_csv(png.with_suffix(".csv"))
    assert set(data.columns) >= {"row", "run_id", "rank", "bin_lo", "bin_hi", "count", "density"}
    scl = summ[summ["row"] == "SCL-out"].set_index("rank")
    assert scl.loc["same class", "pairs"] == 1 and scl.loc["same superclass", "pairs"] == 2
    # bin centres of 50 bins on [-1, 1]: 1.0 -> 0.98, 1/sqrt(2) -> 0.70
    assert scl.loc["same class", "mean_similarity"] == pytest.approx(0.98)
    assert scl.loc["same superclass", "mean_similarity"] == pytest.approx(0.70)


def test_tsne_figure_needs_saved_features(tmp_path):
    with pytest.raises(ValueError, match="saved test_features.pt; run it first: semcl run rince/fig2"):
        write_figure(get_table("rince/fig2"), "smoke", Store(tmp_path), tmp_path / "fig")


def test_fig7_x_axis_spans_the_occupied_bins():
    # SCL-like panel: pairs at 1.0, 1/sqrt(2) (x3) and 0 (x2); RINCE-like panel: every pair at 0
    h = pd.concat([histograms(rank_similarities(F, Y, C)).assign(row="a"),
                   histograms(rank_similarities(np.eye(4)[:, :3], Y, C)).assign(row="b")])
    lo, hi = x_range(h)
    # 50 bins of 0.04 on [-1, 1]: the lowest occupied bin starts at 0, the highest ends at 1; one bin wider, within [-1, 1]
    assert (lo, hi) == (pytest.approx(-0.04), 1.0)
    assert x_range(h.assign(count=0)) == (-1.0, 1.0)  # nothing to fit: the whole range


def test_tsne_key_names_each_colour(tmp_path):
    table = get_table("rince/fig2")
    store = Store(tmp_path)
    runs = plan_runs(table, "smoke")
    rng = np.random.default_rng(0)
    feats = np.repeat(F, 3, axis=0) + rng.normal(0, 0.01, (12, 3))  # 12 points: perplexity (12 - 1) / 3
    for r in runs:
        path = store.run_dir(r.run_id) / FEATURES_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"features": torch.tensor(feats, dtype=torch.float16), "labels": torch.tensor(np.repeat(Y, 3)),
                    "coarse": torch.tensor(np.repeat(C, 3)), "class_names": ["a", "b", "c"],
                    "coarse_names": ["upper_body", "bag"]}, path)
    summ, png = write_figure(table, "smoke", store, tmp_path / "fig")
    data = pd.read_csv(png.with_suffix(".csv"))
    assert summ["points"].tolist() == [12] * len(runs)
    # the colour of each point is its superclass, and the key names both superclasses in id order
    assert data.groupby("coarse")["group"].unique().map(list).to_dict() == {0: ["upper body"], 1: ["bag"]}
    assert colour_key(data) == [(0, "upper body"), (1, "bag")]
    assert group_names({"coarse": None, "class_names": ["t_shirt", "bag"]}) == (["t shirt", "bag"], "class")
    many = pd.DataFrame({"coarse": range(21), "group": [str(k) for k in range(21)]})
    assert colour_key(many) == []  # past 20 groups the tab20 colours repeat: no key that would mislead
    assert group_colours(np.array([0, 20]))[0].tolist() == group_colours(np.array([20]))[0].tolist()
