"""A run stopped by a requeue signal inside an epoch and resumed ends with exactly the weights and losses of the
uninterrupted run: the ViT row with drop-path (masks from the global RNG) in one process, and PaCo's smoke row
(shuffle-BN permutations from the global RNG, a queue gathered from both ranks) on 2 gloo ranks through DDP.
Both read file-backed views, whose DataLoader draws a seed from the global RNG at each epoch's first batch."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime import interrupt
from semcl.store import Store


class Preempted(BaseException):
    """The requeue the tests stand in for (a BaseException: the run keeps its checkpoint, records no failure)."""


def _smoke(table: str, row_prefix: str, epochs: int, per_class: int | None = None, **optim) -> Run:
    base = next(r for r in plan_runs(get_table(table), "smoke") if r.row_label.startswith(row_prefix))
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    for key, value in optim.items():
        setattr(cfg.optim, key, value)
    if per_class is not None:
        cfg.data.synthetic_train_per_class = per_class
    return Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))


def _signal_during_step(n: int) -> None:
    """The requeue signal arrives during the n-th training step of this process (1-based, over all epochs)."""
    real, calls = interrupt.pending, [0]

    def pending() -> bool:
        calls[0] += 1
        if calls[0] == n:
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real()

    interrupt.pending = pending


def _checkpoint(store: Path, run: Run) -> dict:
    return torch.load(Store(store).folder(run.run_id).checkpoint, map_location="cpu", weights_only=False)


def _assert_same_training(a: dict, b: dict) -> None:
    assert a["method"].keys() == b["method"].keys()
    differ = [k for k in a["method"] if not torch.equal(a["method"][k], b["method"][k])]
    assert differ == []
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]


def test_vit_with_drop_path_resumed_inside_an_epoch_is_bit_exact(tmp_path):
    run = _smoke("gpaco/tab13-vit", "GPaCo ViT", epochs=2, per_class=2, batch_size=8)  # 20 classes: 5 steps
    assert run.config.method.drop_path > 0  # the masks the resume must draw again
    execute_run(run, Store(tmp_path / "a"), tmp_path, stage="train")
    reference = _checkpoint(tmp_path / "a", run)
    real = interrupt.pending
    try:
        _signal_during_step(7)  # epoch 2's 2nd step
        try:
            execute_run(run, Store(tmp_path / "b"), tmp_path, stage="train")
            raise AssertionError("the requeue signal did not stop the run")
        except Preempted:
            pass
    finally:
        interrupt.pending, interrupt._pending = real, None
    stopped = _checkpoint(tmp_path / "b", run)
    assert (stopped["epoch"], stopped["step"]) == (1, 2)
    execute_run(run, Store(tmp_path / "b"), tmp_path, stage="train")
    _assert_same_training(reference, _checkpoint(tmp_path / "b", run))


def _rank(rank: int, run: Run, store: str, data: str, init: str, stop: int | None) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    stopped = False
    try:
        if stop is not None:
            _signal_during_step(stop)
        execute_run(run, Store(Path(store)), Path(data), stage="train")
    except Preempted:
        stopped = True
    finally:
        Path(store, f"rank{rank}.json").write_text(json.dumps({"stopped": stopped}))
        dist.destroy_process_group()


def _two_ranks(run: Run, store: Path, data: Path, stop: int | None = None) -> list[bool]:
    store.mkdir(parents=True, exist_ok=True)
    init = store / "init"
    init.unlink(missing_ok=True)
    # fork: each rank skips torch's lazy imports at its first DDP construction (~20 s spawned)
    mp.start_processes(_rank, args=(run, str(store), str(data), f"file://{init}", stop), nprocs=2, join=True,
                       start_method="fork")
    return [json.loads((store / f"rank{r}.json").read_text())["stopped"] for r in range(2)]


def test_ddp_on_two_ranks_resumed_inside_an_epoch_is_bit_exact(tmp_path):
    run = _smoke("gpaco/tab5", "PaCo", epochs=2, batch_size=8)  # 12 steps an epoch
    assert _two_ranks(run, tmp_path / "a", tmp_path) == [False, False]
    reference = _checkpoint(tmp_path / "a", run)
    assert _two_ranks(run, tmp_path / "b", tmp_path, stop=1) == [True, True]  # both ranks stop at one step
    stopped = _checkpoint(tmp_path / "b", run)
    # the signal of step 1 is cast at the vote after step 4 and read at the next one, after step 8 (StopVote)
    assert (stopped["epoch"], stopped["step"]) == (0, 8) and len(stopped["rng_ranks"]) == 2
    assert _two_ranks(run, tmp_path / "b", tmp_path) == [False, False]
    _assert_same_training(reference, _checkpoint(tmp_path / "b", run))
