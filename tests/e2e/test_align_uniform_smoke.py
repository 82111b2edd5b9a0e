"""rince/align-uniform on the smoke profile: runs (debug executor) -> alignment and uniformity of the very test features
the OOD protocol reads, against the float64 brute force -> table -> figure; its trainings are rince/tab2's."""

from __future__ import annotations

import io
import itertools
import json
import math
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest

import semcl.evals.alignment as metric
from semcl.cli.main import main
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

ROWS = ("Cross-entropy", "RINCE-in")


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def _brute(x: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    u = x.astype(np.float64) / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    pairs = list(itertools.combinations(range(len(u)), 2))
    d2 = {(i, j): float(((u[i] - u[j]) ** 2).sum()) for i, j in pairs}
    same = [d2[p] for p in pairs if labels[p[0]] == labels[p[1]]]
    return sum(same) / len(same), math.log(sum(math.exp(-2 * v) for v in d2.values()) / len(pairs))


def test_smoke_runs_measure_alignment_uniformity_and_share_tab2_trainings(tmp_path, monkeypatch):
    seen = []  # the features and labels each run's protocol handed to the metric
    original = metric.alignment

    def spy(features, labels, *args, **kwargs):
        seen.append((features.double().numpy().copy(), labels.numpy().copy()))
        return original(features, labels, *args, **kwargs)

    monkeypatch.setattr(metric, "alignment", spy)
    res, data = str(tmp_path / "results"), str(tmp_path / "data")
    rows = [a for r in ROWS for a in ("--row", r)]
    code, out = _cli("--results", res, "run", "rince/align-uniform", "--profile", "smoke", "--executor", "debug",
                     "--seeds", "1", "--data-root", data, *rows)
    assert code == 0, out
    table, store = get_table("rince/align-uniform"), Store(tmp_path / "results")
    runs = [r for r in plan_runs(table, "smoke") if r.row_label in ROWS and r.seed == 123]
    assert len(runs) == len(seen) == 2
    for run, (feats, labels) in zip(runs, seen, strict=True):
        m = json.loads(store.metrics_path(run.run_id).read_text())["metrics"]
        assert feats.shape[0] == 100 * 5  # synthetic CIFAR-100: 5 test images a class
        align, unif = _brute(feats, labels)
        assert m["feature_alignment"] == pytest.approx(align, rel=1e-9)
        assert m["feature_uniformity"] == pytest.approx(unif, rel=1e-9)
        assert 0.0 <= m["feature_alignment"] <= 4.0 and -8.0 <= m["feature_uniformity"] <= 0.0
        assert 0.0 <= m["ood_auroc_cifar10"] <= 100.0

    # the rows train as rince/tab2's: same training keys, so that table's runs only evaluate them
    tab2 = {(r.row_label, r.seed): r.train_key for r in plan_runs(get_table("rince/tab2"), "smoke")}
    assert all(tab2[(r.row_label, r.seed)] == r.train_key for r in plan_runs(table, "smoke"))

    code, out = _cli("--results", res, "table", "rince/align-uniform", "--profile", "smoke", "--format", "csv",
                     "--seeds", "1")
    assert code == 0, out
    summ = pd.read_csv(io.StringIO(out)).set_index(["row", "column"])
    for run in runs:
        m = json.loads(store.metrics_path(run.run_id).read_text())["metrics"]
        assert summ.loc[(run.row_label, "uniformity"), "mean"] == pytest.approx(m["feature_uniformity"])
        assert summ.loc[(run.row_label, "auroc_cifar10"), "mean"] == pytest.approx(m["ood_auroc_cifar10"])
    code, out = _cli("--results", res, "figure", "rince/align-uniform", "--profile", "smoke", "--seeds", "1")
    assert code == 0, out
    points = pd.read_csv(tmp_path / "results" / "figures" / "rince_align-uniform.smoke.csv").set_index("row")
    for run in runs:
        m = json.loads(store.metrics_path(run.run_id).read_text())["metrics"]
        assert points.loc[run.row_label, "x_mean"] == pytest.approx(m["feature_alignment"])
        assert points.loc[run.row_label, "a_mean"] == pytest.approx(m["ood_auroc_cifar10"])
    assert (tmp_path / "results" / "figures" / "rince_align-uniform.smoke.png").stat().st_size > 0
