"""Gain columns (`eval: gain`): a paper's "+0.4 over MAE" and "1.7 ~ 3.3 on C/R/S", computed per seed from runs."""

from __future__ import annotations

import math

import pytest

from semcl.errors import ConfigError
from semcl.evals.protocols import is_measured, metric_key
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_table
from semcl.report.tables import long_table, render, summary
from semcl.store import Store

ENTRY = """
id: test/gain
paper: test
source: "hand-made"
title: "gain columns"
seeds: [1, 2]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
  - {key: mce, label: "IN-C mCE", eval: robustness, testset: imagenet_c, score: mce}
  - {key: r, label: "IN-R", eval: robustness, testset: imagenet_r, score: top1}
  - {key: gain, label: "Gain", eval: gain, of: [top1], over: {New: Base}}
  - {key: lo, label: "low", eval: gain, of: [mce, r], reduce: min, over: {New: Base}}
  - {key: hi, label: "high", eval: gain, of: [mce, r], reduce: max, over: {New: Base}}
rows:
  - {label: Base, method: ce, overrides: {optim.lr: 0.1}}
  - label: New
    method: ce
    overrides: {optim.lr: 0.2}
    reported: {gain: {value: 0.4, provenance: paper-prose, source: "prose"}}
"""
# per (row, seed): top1, mCE (lower is better), IN-R top-1, chosen by hand
VALUES = {("Base", 1): (80.0, 40.0, 50.0), ("New", 1): (81.0, 37.0, 51.0),   # gain 1; C +3, R +1 -> lo 1, hi 3
          ("Base", 2): (79.0, 41.0, 48.0), ("New", 2): (79.5, 40.5, 50.0)}   # gain 0.5; C +0.5, R +2 -> lo 0.5, hi 2


def _table(tmp_path, text=ENTRY):
    path = tmp_path / "gain.yaml"
    path.write_text(text)
    return load_table(path, tmp_path)


def _store(tmp_path, table, skip=()):
    store = Store(tmp_path / "results")
    keys = [metric_key(c, {}) for c in table.columns[:3]]
    for run in plan_runs(table, "paper"):
        if (run.row_label, run.seed) not in skip:
            metrics = dict(zip(keys, VALUES[(run.row_label, run.seed)], strict=True))
            write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": metrics})
    return store


def test_gains_per_seed_are_oriented_so_better_is_positive(tmp_path):
    t = _table(tmp_path)
    assert all(is_measured(c, t.columns, {}) for c in t.columns)
    long = long_table(t, "paper", _store(tmp_path, t))
    got = {(r.column, r.seed): r.value for r in long[long.row == "New"].itertuples() if r.column in ("gain", "lo", "hi")}
    assert got == {("gain", 1): 1.0, ("gain", 2): 0.5, ("lo", 1): 1.0, ("lo", 2): 0.5, ("hi", 1): 3.0, ("hi", 2): 2.0}
    assert long[(long.row == "Base") & long.column.isin(["gain", "lo", "hi"])].empty  # only rows named in `over`
    s = summary(t, "paper", long)
    cell = s[(s.row == "New") & (s.column == "gain")].iloc[0]
    assert cell["mean"] == pytest.approx(0.75) and cell["std"] == pytest.approx(math.sqrt(0.125)) and cell["n"] == 2
    assert cell["delta"] == pytest.approx(0.75 - 0.4)
    md = render(t, "paper", s, "md")
    # only the gain column has a paper value: the other columns show ours alone
    assert "| 0.75 ± 0.35 (n=2) / 0.40 / 0.35 | 0.75 ± 0.35 (n=2) | 2.50 ± 0.71 (n=2) |" in md


def test_a_seed_missing_either_row_is_left_out(tmp_path):
    t = _table(tmp_path)
    long = long_table(t, "paper", _store(tmp_path, t, skip={("Base", 2)}))
    g = long[(long.row == "New") & (long.column == "gain")]
    assert g.seed.tolist() == [1] and g.value.tolist() == [1.0]


def test_bad_gain_columns_fail_at_load(tmp_path):
    with pytest.raises(ConfigError, match="column 'gain': key 'over' names no row 'Nope'"):
        _table(tmp_path, ENTRY.replace("over: {New: Base}}\n  - {key: lo", "over: {New: Nope}}\n  - {key: lo"))
    with pytest.raises(ConfigError, match="column 'gain': key 'of' names 'top5', which is no measured column"):
        _table(tmp_path, ENTRY.replace("of: [top1]", "of: [top5]"))
    with pytest.raises(ConfigError, match="column 'lo': key 'reduce' must be one of"):
        _table(tmp_path, ENTRY.replace("reduce: min, ", ""))
    with pytest.raises(ConfigError, match="column 'gain': key 'reduce' applies only"):
        _table(tmp_path, ENTRY.replace("of: [top1],", "of: [top1], reduce: max,"))
    with pytest.raises(ConfigError, match="key 'testset' does not apply to eval 'gain'"):
        _table(tmp_path, ENTRY.replace("of: [top1],", "of: [top1], testset: imagenet_c,"))
