"""PaCo/GPaCo through the engine: smoke run of gpaco/cifar100-lt, and a bit-exact resume that
restores PaCo's queue, its labels and its pointer from the checkpoint."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import semcl.engine.checkpointer as checkpointer_mod
from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime.checkpoint import load
from semcl.store import Store


def _same(a: dict, b: dict) -> bool:
    """Metric dicts equal; an empty shot group (null, or NaN in older records) equal to itself."""
    def gap(v):
        return v is None or math.isnan(v)
    return a.keys() == b.keys() and all((gap(a[k]) and gap(b[k])) or a[k] == b[k] for k in a)


def _smoke_run(row: str, epochs: int) -> Run:
    t = get_table("gpaco/cifar100-lt")
    base = next(r for r in plan_runs(t, "smoke") if r.row_label == row)
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    return Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))


@pytest.mark.parametrize("row", ["PaCo, IF 100", "GPaCo, IF 100"])
def test_smoke_run_reports_shot_groups(tmp_path, row):
    rec = execute_run(_smoke_run(row, epochs=1), Store(tmp_path), tmp_path / "unused")
    m = rec["metrics"]
    assert 0 <= m["acc_overall"] <= 100 and m["acc_overall"] == m["head_top1"]
    assert {"acc_many", "acc_medium", "acc_few"} <= set(m)
    assert math.isfinite(rec["history"][0]["loss"])


class Preempted(Exception):
    pass


def test_paco_resume_restores_queue_labels_and_pointer(tmp_path, monkeypatch):
    run = _smoke_run("PaCo, IF 100", epochs=2)
    reference = execute_run(run, Store(tmp_path / "a"), tmp_path / "unused")
    ref_state = load(Store(tmp_path / "a").run_dir(run.run_id) / "checkpoints" / "last.pt")["method"]

    store = Store(tmp_path / "b")
    real_save = checkpointer_mod.save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if state["epoch"] == 1:
            assert int((state["method"]["bank.labels"] >= 0).sum()) > 0  # the queue holds labelled keys
            raise Preempted

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path / "unused")
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real_save)
    resumed = execute_run(run, store, tmp_path / "unused")
    state = load(store.run_dir(run.run_id) / "checkpoints" / "last.pt")["method"]
    for key in ("bank.features", "bank.labels", "bank.ptr"):
        assert torch.equal(state[key], ref_state[key]), key
    assert _same(resumed["metrics"], reference["metrics"])
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in reference["history"]]


@pytest.mark.slow
def test_smoke_table_through_the_cli(tmp_path):
    import io
    from contextlib import redirect_stdout

    import pandas as pd

    from semcl.cli.main import main

    res = str(tmp_path / "results")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--results", res, "run", "gpaco/cifar100-lt", "--profile", "smoke", "--executor", "local",
                     "--workers", "2"]) == 0
        assert main(["--results", res, "table", "gpaco/cifar100-lt", "--profile", "smoke", "--format", "csv"]) == 0
    assert "13 of 13 runs done" in out.getvalue()
    csv = out.getvalue()[out.getvalue().index("row,column"):].split("\n(written")[0]
    summ = pd.read_csv(io.StringIO(csv))
    top1 = summ[summ.column == "top1"]
    assert len(top1) == 13 and (top1.n == 1).all() and top1["mean"].between(0, 100).all()
    assert set(summ.column) == {"top1", "many", "medium", "few"}
