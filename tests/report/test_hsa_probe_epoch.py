"""HSA's linear-probe columns read the probe epoch CSML reports (main_lincls.py keeps best_acc1 over the
epochs), the last epoch a named column beside it, as the RINCE tables have; run ids do not move. That the probe's
best is the max over its epochs' history: tests/evals/test_linear_probe.py."""

from __future__ import annotations

import json
from pathlib import Path

from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.claim_verdicts import judge_claims
from semcl.report.claims import load_claims
from semcl.report.tables import long_table
from semcl.store import Store

PROBE_TABLES = ("hsa/linear", "hsa/abl-components", "hsa/abl-freq", "hsa/abl-k", "hsa/abl-stages", "hsa/app-byol",
                "hsa/app-more-positives")
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "run_ids.json"
# per-epoch probe top-1 of each run, by hand: best 74.5 at epoch 2, last 73.0 (seed 123) ...
HISTORY = {"MoCo v2, 200 ep": [61.0, 68.0, 67.5], "CsMl, 200 ep, single crop": [62.0, 74.5, 73.0]}


def test_every_hsa_probe_table_reads_the_best_epoch_and_names_the_last():
    for tid in PROBE_TABLES:
        cols = {c.key: (c.label, c.eval, c.epoch) for c in get_table(tid).columns}
        assert cols == {"top1": ("Linear top-1 (best ep.)", "linear_probe", "best"),
                        "top1_last": ("Linear top-1 (last ep.)", "linear_probe", "last")}, tid


def test_columns_and_claims_read_best_and_last_of_a_hand_built_history(tmp_path):
    table, store = get_table("hsa/linear"), Store(tmp_path)
    for run in plan_runs(table, "paper"):
        if run.row_label in HISTORY:
            h = HISTORY[run.row_label]
            write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
                "linear_top1_last": h[-1], "linear_top1_best": max(h)}})
    long = long_table(table, "paper", store)
    got = {(r.row, r.column): r.value for r in long.itertuples()}
    assert got == {("MoCo v2, 200 ep", "top1"): 68.0, ("MoCo v2, 200 ep", "top1_last"): 67.5,
                   ("CsMl, 200 ep, single crop", "top1"): 74.5, ("CsMl, 200 ep, single crop", "top1_last"): 73.0}
    v = next(v for v in judge_claims(load_claims("hsa"), "paper", store) if v.claim.id == "consistent-moco")
    assert (v.judgement.mean_a, v.judgement.mean_b, v.judgement.diff) == (74.5, 68.0, 6.5)  # best epoch, 1 seed


def test_run_ids_of_the_probe_tables_did_not_move():
    golden = json.loads(GOLDEN.read_text())
    for tid in PROBE_TABLES:
        table = get_table(tid)
        for profile in table.profiles:
            ids: dict[str, list[str]] = {}
            for run in plan_runs(table, profile):
                ids.setdefault(run.row_label, []).append(run.run_id)
            assert ids == golden[tid][profile], (tid, profile)
