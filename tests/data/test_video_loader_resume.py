"""rince/tab4 through the engine with clips decoded in two loader workers (SEMCL_LOADER_WORKERS=2, on the CPU):
the same clips, losses and metrics as the in-process path, and a run stopped inside an epoch -- while
the loader has drawn later steps' plans -- resumes to the same end."""

from __future__ import annotations

import copy

import pytest
import torch

from semcl.data.video import ClipSampler
from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime import interrupt
from semcl.store import Store


class Preempted(Exception):
    pass


def _run() -> Run:
    base = next(r for r in plan_runs(get_table("rince/tab4"), "smoke") if r.row_label == "RINCE")
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs, cfg.optim.batch_size = 2, 4  # 16 videos: 4 steps per epoch, so plans run ahead
    return Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))


def test_workers_resume_equals_the_in_process_run(tmp_path, monkeypatch) -> None:
    run = _run()
    seen: list[torch.Tensor] = []
    real_sample = ClipSampler.sample
    monkeypatch.setattr(ClipSampler, "sample", lambda self, n, g: seen.append((p := real_sample(self, n, g)).frames) or p)
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    reference = execute_run(run, Store(tmp_path / "a"), tmp_path)  # every step's plan drawn as it trains
    ref_clips, seen[:] = list(seen), []
    assert len(ref_clips) == 8

    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "2")
    calls = {"n": 0}
    real_pending = interrupt.pending

    def signal_at_step_6() -> bool:
        calls["n"] += 1
        if calls["n"] == 6:  # epoch 2, after its second step: its steps 3 and 4 are planned already
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real_pending()

    monkeypatch.setattr(interrupt, "pending", signal_at_step_6)
    store = Store(tmp_path / "b")
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path)
    assert len(seen) == 8 and all(torch.equal(a, b) for a, b in zip(seen, ref_clips, strict=True))
    seen[:] = []
    monkeypatch.setattr(interrupt, "pending", real_pending)
    resumed = execute_run(run, store, tmp_path)
    # the checkpoint holds the generator of epoch 2's third step, not the loader's drawn-ahead one
    assert len(seen) == 2 and all(torch.equal(a, b) for a, b in zip(seen, ref_clips[-2:], strict=True))
    assert resumed["history"] == [{**h, "seconds": r["seconds"]} for h, r in
                                  zip(reference["history"], resumed["history"], strict=True)]
    assert resumed["metrics"] == reference["metrics"]
