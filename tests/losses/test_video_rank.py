"""RINCE video: rank matrices, the loss against a float64 brute force, make_views replaying clips."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.losses import ranked_info_nce
from semcl.losses.video_ranks import video_ranks, video_similarities


def brute_rince(sim: torch.Tensor, own: tuple[int, int, int], taus: list[float]) -> float:
    """Σ_r mean_a −log(Σ_{P_r} e / (Σ_{P_r} e + Σ_{N_r} e)), e = exp(s/τ_r), from the formula."""
    total = 0.0
    for r, tau in enumerate(taus, start=1):
        per = []
        for a in range(sim.shape[0]):
            pos = neg = 0.0
            for j in range(sim.shape[1]):
                rank = own[j] if j < 3 else 0
                e = math.exp(float(sim[a, j]) / tau)
                if rank == r:
                    pos += e
                elif rank == 0 or rank > r:
                    neg += e
            if pos > 0:
                per.append(-math.log(pos / (pos + neg)))
        total += sum(per) / len(per) if per else 0.0
    return total


@pytest.mark.parametrize("kind,own,taus", [("infonce", (1, -1, -1), [0.1]), ("hp", (1, 1, 1), [0.1]),
                                           ("hn", (1, 0, 0), [0.1]), ("rince", (1, 2, 3), [0.1, 0.15, 0.2])])
def test_video_loss_matches_brute_force(kind, own, taus) -> None:
    g = torch.Generator().manual_seed(0)
    q, kf, ks, kv = (torch.nn.functional.normalize(torch.randn(4, 8, generator=g, dtype=torch.float64), dim=1)
                     for _ in range(4))
    bank = torch.nn.functional.normalize(torch.randn(6, 8, generator=g, dtype=torch.float64), dim=1)
    sim = video_similarities(q, kf, ks, kv, bank)
    assert torch.allclose(sim[:, 1], (q * ks).sum(1)) and torch.allclose(sim[:, 3:], q @ bank.T)
    ranks = video_ranks(kind, torch.ones(4, dtype=torch.bool), 6)
    assert ranks[:, :3].tolist() == [list(own)] * 4 and (ranks[:, 3:] == 0).all()
    loss = ranked_info_nce(sim, ranks, taus, form="in", positives="rank", rank_reduction="sum")
    assert float(loss) == pytest.approx(brute_rince(sim, own, taus), rel=1e-9)


def test_short_video_drops_x_v() -> None:
    ranks = video_ranks("rince", torch.tensor([True, False]), 2)
    assert ranks.tolist() == [[1, 2, 3, 0, 0], [1, 2, -1, 0, 0]]
    with pytest.raises(ValueError, match="unknown video row kind"):
        video_ranks("xx", torch.tensor([True]), 1)


class Preempted(Exception):
    pass


def test_resume_mid_epoch_replays_the_same_clips(tmp_path, monkeypatch) -> None:
    """rince/tab4 smoke RINCE row, 2 epochs of 2 steps: a requeue signal inside epoch 2 checkpoints
    there; the resumed run samples the very clips (frame indices) of the uninterrupted one and ends
    with the same losses and metrics."""
    import copy

    from semcl.data.video import ClipSampler
    from semcl.engine.job import execute_run
    from semcl.registry.plan import Run, make_run_id, plan_runs
    from semcl.registry.tables import get_table
    from semcl.runtime import interrupt
    from semcl.store import Store

    base = next(r for r in plan_runs(get_table("rince/tab4"), "smoke") if r.row_label == "RINCE")
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = 2
    run = Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))
    seen: list[torch.Tensor] = []
    real_sample = ClipSampler.sample
    monkeypatch.setattr(ClipSampler, "sample", lambda self, n, g: seen.append((p := real_sample(self, n, g)).frames) or p)
    reference = execute_run(run, Store(tmp_path / "a"), tmp_path)
    ref_clips, seen[:] = list(seen), []
    assert len(ref_clips) == 4  # 16 videos, batch 8: 2 steps x 2 epochs

    calls = {"n": 0}
    real_pending = interrupt.pending

    def signal_at_step_3() -> bool:
        calls["n"] += 1
        if calls["n"] == 3:  # epoch 2, after its first step
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real_pending()

    monkeypatch.setattr(interrupt, "pending", signal_at_step_3)
    store = Store(tmp_path / "b")
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path)
    monkeypatch.setattr(interrupt, "pending", real_pending)
    resumed = execute_run(run, store, tmp_path)
    # first attempt: steps 1-3; the resumed one: step 4 only, the same clips as the reference's 4th
    assert len(seen) == 4 and all(torch.equal(a, b) for a, b in zip(seen, ref_clips, strict=True))
    assert resumed["history"] == [{**h, "seconds": r["seconds"]} for h, r in
                                  zip(reference["history"], resumed["history"], strict=True)]
    assert resumed["metrics"] == reference["metrics"]
