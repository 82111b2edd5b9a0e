"""rince/tab4: bank keys of the anchor's own video take no part in the loss (method.own_video_keys exclude),
checked in float64 against the loss with those columns removed and against a brute force; "negative" keeps
them as negatives (the variant)."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.losses import ranked_info_nce
from semcl.losses.video_ranks import video_ranks, video_similarities
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import method_class
from semcl.registry.tables import get_table

TAUS = [0.1, 0.15, 0.2]


def _brute(sim: torch.Tensor, ranks: torch.Tensor) -> float:
    """Σ_r mean_a −log(Σ_{P_r} e / (Σ_{P_r} e + Σ_{N_r} e)); rank −1 columns skipped."""
    total = 0.0
    for r, tau in enumerate(TAUS, start=1):
        per = []
        for a in range(sim.shape[0]):
            pos = neg = 0.0
            for j in range(sim.shape[1]):
                rank, e = int(ranks[a, j]), math.exp(float(sim[a, j]) / tau)
                if rank == r:
                    pos += e
                elif rank == 0 or rank > r:
                    neg += e
            if pos > 0:
                per.append(-math.log(pos / (pos + neg)))
        total += sum(per) / len(per)
    return total


def test_own_video_bank_keys_are_left_out():
    g = torch.Generator().manual_seed(0)
    q, kf, ks, kv = (torch.nn.functional.normalize(torch.randn(3, 8, generator=g, dtype=torch.float64), dim=1)
                     for _ in range(4))
    bank = torch.nn.functional.normalize(torch.randn(5, 8, generator=g, dtype=torch.float64), dim=1)
    bank_videos = torch.tensor([7, 2, 7, -1, 9])  # slot 3 empty (-1: the initial random keys)
    videos = torch.tensor([7, 9, 4])  # anchor 0 has two keys in the bank, anchor 1 one, anchor 2 none
    sim = video_similarities(q, kf, ks, kv, bank)
    own = bank_videos[None, :] == videos[:, None]
    ranks = video_ranks("rince", torch.ones(3, dtype=torch.bool), 5, own)
    assert ranks[:, 3:].tolist() == [[-1, 0, -1, 0, 0], [0, 0, 0, 0, -1], [0, 0, 0, 0, 0]]
    loss = ranked_info_nce(sim, ranks, TAUS, form="in", positives="rank", rank_reduction="sum")
    assert float(loss) == pytest.approx(_brute(sim, ranks), rel=1e-12)
    # = each anchor's loss with its own-video columns deleted (rows differ in width: one anchor at a time)
    per_rank = torch.zeros(3, dtype=torch.float64)
    for a in range(3):
        keep = torch.cat([torch.ones(3, dtype=torch.bool), ~own[a]])
        r = video_ranks("rince", torch.ones(1, dtype=torch.bool), int((~own[a]).sum()))
        per_rank += ranked_info_nce(sim[a:a + 1, keep], r, TAUS, form="in", positives="rank", return_terms=True)
    torch.testing.assert_close(loss, per_rank.sum() / 3, rtol=1e-12, atol=0)
    kept = ranked_info_nce(sim, video_ranks("rince", torch.ones(3, dtype=torch.bool), 5), TAUS, form="in",
                           positives="rank", rank_reduction="sum")
    assert float(kept) != pytest.approx(float(loss))  # as negatives they change the loss
    with pytest.raises(ValueError, match="own_in_bank must be"):
        video_ranks("rince", torch.ones(3, dtype=torch.bool), 4, own)


@pytest.mark.parametrize("setting,ignored", [("exclude", 2), ("negative", 0)])
def test_training_step_masks_the_anchors_own_video(setting, ignored, monkeypatch):
    import semcl.methods.video_rank.method as video_method

    t = get_table("rince/tab4")
    assert t.resolve(t.row("RINCE"), "paper").method.own_video_keys == "exclude"
    assert t.resolve(t.row("RINCE (own-video bank keys as negatives)"), "paper").method.own_video_keys == "negative"
    cfg = t.resolve(t.row("RINCE"), "smoke")
    cfg.method.own_video_keys = setting
    torch.manual_seed(0)
    m = method_class("video_rince")(cfg, DataInfo(4, 3, None))
    m.bank.labels[:3] = torch.tensor([5, 5, 1])  # bank slots 0-2 hold keys of videos 5, 5 and 1
    seen = []

    def spy(sim, ranks, *args, **kwargs):
        seen.append(ranks)
        return ranked_info_nce(sim, ranks, *args, **kwargs)

    monkeypatch.setattr(video_method, "ranked_info_nce", spy)
    clip = torch.randn(2, 3, 4, 16, 16)
    run_step(m, Batch.of([clip] * 4, torch.tensor([0, 1]), indices=torch.tensor([5, 8])))
    bank_ranks = seen[0][:, 3:]
    assert int((bank_ranks == -1).sum()) == ignored and (bank_ranks[1] == 0).all()  # video 8: none in the bank
