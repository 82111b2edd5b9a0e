"""Derived rows (mean over pairs of A − B per seed, the SCNS abstract's delta reading) on hand-made records."""

from __future__ import annotations

import math

import pytest

from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import load_table
from semcl.report.tables import long_table, render, summary
from semcl.store import Store

ENTRY = """
id: test/derived
paper: test
source: "hand-made"
title: "derived rows"
seeds: [1, 2]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: KD p1, method: kd_student, overrides: {optim.lr: 0.1}}
  - {label: KD p2, method: kd_student, overrides: {optim.lr: 0.2}}
  - {label: SCNS p1, method: kd_student, overrides: {optim.lr: 0.3}}
  - {label: SCNS p2, method: kd_student, overrides: {optim.lr: 0.4}}
  - label: SCNS minus KD
    derived: {pairs: [[SCNS p1, KD p1], [SCNS p2, KD p2]]}
    reported: {top1: {value: 1.72, provenance: paper-abstract, source: "abstract"}}
"""
# top-1 per (row, seed), chosen by hand
TOP1 = {("KD p1", 1): 70.0, ("KD p2", 1): 60.0, ("SCNS p1", 1): 73.0, ("SCNS p2", 1): 61.0,   # d_1 = (3 + 1) / 2 = 2
        ("KD p1", 2): 71.0, ("KD p2", 2): 62.0, ("SCNS p1", 2): 71.5, ("SCNS p2", 2): 63.5}   # d_2 = (0.5 + 1.5) / 2 = 1


def _table(tmp_path, text=ENTRY):
    path = tmp_path / "derived.yaml"
    path.write_text(text)
    return load_table(path, tmp_path)


def _store(tmp_path, table, skip=()):
    store = Store(tmp_path / "results")
    for run in plan_runs(table, "paper"):
        if (run.row_label, run.seed) not in skip:
            write_json_atomic(store.metrics_path(run.run_id),
                              {"run_id": run.run_id, "metrics": {"acc_overall": TOP1[(run.row_label, run.seed)]}})
    return store


def test_derived_row_is_the_seed_mean_of_the_pair_average(tmp_path):
    t = _table(tmp_path)
    assert [r.row_label for r in plan_runs(t, "paper")].count("SCNS minus KD") == 0  # runs nothing
    assert t.row("SCNS minus KD").implemented
    long = long_table(t, "paper", _store(tmp_path, t))
    d = long[long.row == "SCNS minus KD"].sort_values("seed")
    assert d.value.tolist() == [2.0, 1.0]
    s = summary(t, "paper", long)
    cell = s[s.row == "SCNS minus KD"].iloc[0]
    assert cell["mean"] == pytest.approx(1.5) and cell["std"] == pytest.approx(math.sqrt(0.5)) and cell["n"] == 2
    assert cell["delta"] == pytest.approx(1.5 - 1.72)
    md = render(t, "paper", s, "md")
    assert "| SCNS minus KD | 1.50 ± 0.71 (n=2) / 1.72 / -0.22 |" in md
    assert "average over its 2 pair(s) of (method row − baseline row)" in md


def test_a_seed_with_a_missing_pair_member_is_left_out(tmp_path):
    t = _table(tmp_path)
    long = long_table(t, "paper", _store(tmp_path, t, skip={("KD p2", 2)}))
    d = long[long.row == "SCNS minus KD"]
    assert d.seed.tolist() == [1] and d.value.tolist() == [2.0]


def test_bad_derived_rows_fail_at_load(tmp_path):
    with pytest.raises(ConfigError, match="names no measured row 'nope'"):
        _table(tmp_path, ENTRY.replace("[SCNS p2, KD p2]", "[SCNS p2, nope]"))
    with pytest.raises(ConfigError, match="a 'derived' row has no key 'method'"):
        _table(tmp_path, ENTRY.replace("  - label: SCNS minus KD\n", "  - label: SCNS minus KD\n    method: kd_student\n"))
    with pytest.raises(ConfigError, match="is not \\[row A, row B\\]"):
        _table(tmp_path, ENTRY.replace("[SCNS p2, KD p2]]", "[SCNS p2]]"))
    with pytest.raises(ConfigError, match="key 'method' is required"):
        _table(tmp_path, ENTRY.replace("  - {label: KD p2, method: kd_student,", "  - {label: KD p2,"))


CLAIMS = """
paper: test
claims:
  - {id: gain, table: test/derived, column: top1, a: SCNS minus KD, direction: greater, stated: 1.72,
     provenance: paper-abstract, source: s, quote: q}
"""


def test_a_claim_on_a_derived_row_is_a_one_sample_test_against_zero(tmp_path):
    from semcl.report.claim_verdicts import judge_claims
    from semcl.report.claims import load_claims_file

    t = _table(tmp_path)
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS)
    cf = load_claims_file(path, {t.id: t})
    assert cf.claims[0].b is None and cf.claims[0].describe() == "SCNS minus KD > 0 on top1 (test/derived)"
    (v,) = judge_claims(cf, "paper", _store(tmp_path, t), {t.id: t})
    j = v.judgement
    assert (j.mean_a, j.n_a, j.mean_b, j.diff) == (1.5, 2, 0.0, 1.5)
    # d = [2, 1]: one-sample t = 1.5 / (0.7071 / sqrt 2) = 3 with 1 df; two-sided p = 1 - 2 atan(3)/pi
    assert j.p == pytest.approx(1 - 2 * math.atan(3) / math.pi, rel=1e-6)
    path.write_text(CLAIMS.replace("a: SCNS minus KD,", "a: KD p1,"))
    with pytest.raises(ConfigError, match="key 'b' is required unless 'a' names a derived row"):
        load_claims_file(path, {t.id: t})
