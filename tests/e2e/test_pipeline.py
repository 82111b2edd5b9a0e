"""The whole road on the smoke profile: plan -> run (local executor, 3 seeds) -> table; skip-if-done;
resume after an interruption ends with the same metrics, bit for bit."""

from __future__ import annotations

import copy
import io
import json
import re
from contextlib import redirect_stdout

import pandas as pd
import pytest
import torch

import semcl.engine.checkpointer as checkpointer_mod
from semcl.cli.main import main
from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store


def _cli(*args) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@pytest.mark.slow
def test_smoke_table_three_seeds_through_local_executor(tmp_path):
    res = str(tmp_path / "results")
    # four rows (a CE, an SCL, a RINCE and a metric-learning method) x 3 seeds keep CI short; every row of
    # the entry trains in its method's own tests
    rows = ["Cross-entropy", "SCL-in", "RINCE-out-in", "Triplet"]
    pick = [a for r in rows for a in ("--row", r)]
    code, out = _cli("--results", res, "run", "rince/tab2", "--profile", "smoke", "--executor", "local", "--workers", "2",
                     *pick)
    assert code == 0 and "12 runs to submit" in out and "12 of 12 runs done" in out
    code, out = _cli("--results", res, "plan", "rince/tab2", "--profile", "smoke")
    fields = [re.split(r"\s{2,}", ln.strip()) for ln in out.splitlines() if not ln.startswith("#")]
    assert {(f[1], f[3]) for f in fields if f[1] in rows} == {(r, "done") for r in rows}
    # a second invocation submits nothing
    code, out = _cli("--results", res, "run", "rince/tab2", "--profile", "smoke", "--executor", "local", *pick)
    assert code == 0 and out.startswith("0 runs to submit (12 already done")
    code, out = _cli("--results", res, "table", "rince/tab2", "--profile", "smoke", "--format", "csv")
    summ = pd.read_csv(io.StringIO(out))
    impl = summ[summ.implemented & (summ.n > 0)]  # rows not run (and the tab9 / tab10 select rows) have n = 0
    assert set(impl.row) == set(rows) and len(impl) == 4 * impl.column.nunique() and (impl.n == 3).all()
    assert ((impl["mean"] >= 0) & (impl["mean"] <= 100)).all()
    # the synthetic data carries class structure: retrieval beats chance (1% fine, 5% coarse) by far
    r1 = impl[impl.column == "r1_fine"]["mean"]
    assert (r1 > 50).all()
    # every record carries its provenance
    t = get_table("rince/tab2")
    rec = json.loads(Store(tmp_path / "results").metrics_path(plan_runs(t, "smoke")[0].run_id).read_text())
    assert set(rec) >= {"run_id", "seed", "metrics", "config", "git", "versions", "device", "wall_time_s"}
    assert rec["versions"]["torch"] == "2.14.1"


def _smoke_run(row: str, epochs: int, train_per_class: int | None = None, memory_format: str | None = None) -> Run:
    t = get_table("rince/tab2")
    base = next(r for r in plan_runs(t, "smoke") if r.row_label == row and r.seed == 123)
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    cfg.model.memory_format = memory_format
    if train_per_class is not None:
        cfg.data.synthetic_train_per_class = train_per_class
    return Run(base.table_id, base.row_label, 123, "smoke", cfg, make_run_id(cfg, 123))


class Preempted(Exception):
    pass


@pytest.mark.parametrize("row,memory_format", [("RINCE-in", None), ("Cross-entropy", None),
                                               ("RINCE-in", "channels_last")])
def test_resume_after_interruption_is_bit_exact(tmp_path, monkeypatch, row, memory_format):
    run = _smoke_run(row, epochs=3, memory_format=memory_format)
    data_root = tmp_path / "unused"
    reference = execute_run(run, Store(tmp_path / "a"), data_root)

    store = Store(tmp_path / "b")
    real_save = checkpointer_mod.save_atomic
    saves = []

    def save_then_die(state, path):
        real_save(state, path)
        saves.append(state["epoch"])
        if state["epoch"] == 2:  # killed right after the epoch-2 checkpoint
            raise Preempted

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    with pytest.raises(Preempted):
        execute_run(run, store, data_root)
    assert store.status(run.run_id)[0] == "failed" and saves == [1, 2]
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real_save)
    resumed = execute_run(run, store, data_root)
    assert store.status(run.run_id) == ("done", "")
    assert resumed["metrics"] == reference["metrics"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in reference["history"]]
    assert "resumed from" in (store.run_dir(run.run_id) / "log.txt").read_text()


def test_resume_from_a_requeue_signal_mid_epoch_is_bit_exact(tmp_path, monkeypatch):
    """The signal arrives during epoch 2; the loop checkpoints at the next step boundary (with the
    generator's position) and the requeued run replays the rest of that epoch exactly."""
    from semcl.runtime import interrupt
    run = _smoke_run("RINCE-out-in", epochs=2)
    reference = execute_run(run, Store(tmp_path / "a"), tmp_path)
    calls = {"n": 0}
    real_pending = interrupt.pending

    def signal_at_step_14() -> bool:
        calls["n"] += 1
        if calls["n"] == 14:  # epoch 2 (10 steps per epoch), 4th step
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real_pending()

    monkeypatch.setattr(interrupt, "pending", signal_at_step_14)
    store = Store(tmp_path / "b")
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path)
    state = torch.load(store.run_dir(run.run_id) / "checkpoints" / "last.pt", weights_only=False)
    assert (state["epoch"], state["step"]) == (1, 4)
    monkeypatch.setattr(interrupt, "pending", real_pending)
    resumed = execute_run(run, store, tmp_path)
    assert resumed["metrics"] == reference["metrics"]
    assert resumed["history"][1]["loss"] == reference["history"][1]["loss"]
    assert "resumed from" in (store.run_dir(run.run_id) / "log.txt").read_text()


def test_fp16_autocast_with_loss_scaling_resumes_bit_exact(tmp_path, monkeypatch):
    """optim.amp fp16: the forward runs in float16 under autocast, the loss is scaled, and the scaler's
    state travels with the checkpoint, so a resumed run ends exactly where the uninterrupted one does."""
    run = _smoke_run("Cross-entropy", epochs=2, train_per_class=3)  # fp16 convolutions are slow on the CPU
    run.config.optim.amp = "fp16"
    run = Run(run.table_id, run.row_label, run.seed, run.profile, run.config, make_run_id(run.config, run.seed))
    reference = execute_run(run, Store(tmp_path / "a"), tmp_path)
    fp32 = execute_run(_smoke_run("Cross-entropy", epochs=2, train_per_class=3), Store(tmp_path / "c"), tmp_path)
    assert reference["history"][0]["loss"] != fp32["history"][0]["loss"]  # the forward really ran in fp16
    assert abs(reference["history"][0]["loss"] - fp32["history"][0]["loss"]) < 0.05
    ckpt = torch.load(Store(tmp_path / "a").run_dir(run.run_id) / "checkpoints" / "last.pt", weights_only=False)
    assert ckpt["scaler"]["scale"] > 0 and "_growth_tracker" in ckpt["scaler"]

    store = Store(tmp_path / "b")
    real_save = checkpointer_mod.save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if state["epoch"] == 1:
            raise Preempted

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path)
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real_save)
    resumed = execute_run(run, store, tmp_path)
    assert resumed["metrics"] == reference["metrics"]
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in reference["history"]]
