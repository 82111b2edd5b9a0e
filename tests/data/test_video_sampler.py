"""Clip sampler: x_f / x_s / x_v constraints, the short-video fallback, and resumable randomness."""

from __future__ import annotations

import pytest
import torch

from semcl.data.video import ClipAugment, ClipSampler
from semcl.data.video.sampler import _pick


def test_pick_is_uniform_over_two_intervals() -> None:
    u = (torch.arange(6, dtype=torch.float64) + 0.5) / 6
    value, ok = _pick(u, torch.full((6,), 2), torch.full((6,), 7), torch.full((6,), 9))
    assert value.tolist() == [0, 1, 2, 7, 8, 9] and ok.all()
    u = (torch.arange(7, dtype=torch.float64) + 0.5) / 7  # overlapping parts merge: 0..6 once each
    value, _ = _pick(u, torch.full((7,), 5), torch.full((7,), 3), torch.full((7,), 6))
    assert value.tolist() == list(range(7))
    _, ok = _pick(u[:1], torch.tensor([-1]), torch.tensor([7]), torch.tensor([6]))
    assert not ok.any()


def _brute_force_has_v(a: int, s: int, last: int, gap: int) -> bool:
    return any(abs(v - a) >= gap and abs(v - s) >= gap for v in range(last + 1))


@pytest.mark.parametrize("measure", ["start", "edge"])
def test_constraints_and_fallback(measure: str) -> None:
    sampler = ClipSampler(gap_measure=measure)
    gap = 48 if measure == "start" else 48 + 46
    counts = torch.randint(1, 320, (400,), generator=torch.Generator().manual_seed(1))
    plan = sampler.sample(counts, torch.Generator().manual_seed(2))
    assert plan.frames.shape == (400, 3, 16)
    for n, (a, s, v), ok, frames in zip(counts.tolist(), plan.starts.tolist(), plan.gap_ok.tolist(), plan.frames, strict=True):
        last = max(n - 46, 0)
        assert 0 <= min(a, s, v) and max(a, s, v) <= last and abs(s - a) <= 24
        for start, clip in zip((a, s, v), frames.tolist(), strict=True):
            assert clip == [min(start + 3 * k, n - 1) for k in range(16)]
        if last >= gap + 24:  # long enough: the anchor always leaves room for x_v
            assert ok
        if ok:
            assert abs(v - a) >= gap and abs(v - s) >= gap
        else:  # fallback "farthest": no valid start existed, x_v at the farther end
            assert not _brute_force_has_v(a, s, last, gap)
            assert v == (0 if min(a, s) >= last - max(a, s) else last)
    assert not plan.gap_ok.all() and plan.gap_ok.any()  # both regimes occurred


def test_shuffled_positive_permutes_the_anchor_frames() -> None:
    plan = ClipSampler(positive="shuffled").sample(torch.tensor([200, 150]), torch.Generator().manual_seed(0))
    assert torch.equal(plan.starts[:, 0], plan.starts[:, 1])
    assert torch.equal(plan.frames[:, 1].sort(dim=1).values, plan.frames[:, 0])
    assert not torch.equal(plan.frames[:, 1], plan.frames[:, 0])
    assert ((plan.starts[:, 2] - plan.starts[:, 0]).abs() >= 48).all()


def test_center_clips_hand_computed() -> None:
    s = ClipSampler()
    assert s.center_clips(torch.tensor([100]))[0, 0, 0] == 27  # last start 54, centre 27
    assert s.center_clips(torch.tensor([101]), 2)[0, :, 0].tolist() == [14, 41]  # 55·(1/4, 3/4) rounded
    short = s.center_clips(torch.tensor([30]))[0, 0].tolist()
    assert short == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29, 29, 29, 29, 29, 29]


def test_resumed_generator_samples_the_same_clips() -> None:
    """The engine checkpoints the epoch generator mid-epoch; restoring it must replay clips and views."""
    sampler, aug = ClipSampler(), ClipAugment(size=4)
    counts = torch.randint(20, 300, (5, 8), generator=torch.Generator().manual_seed(3))
    clip = torch.randint(0, 256, (8, 3, 16, 6, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))

    def step(g: torch.Generator, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        return sampler.sample(counts[b], g).frames, aug(clip, g)

    g = torch.Generator().manual_seed(123 * 1_000_003 + 7)  # the engine's epoch_generator(seed, epoch)
    full, saved = [], None
    for b in range(5):
        if b == 2:
            saved = g.get_state()
        full.append(step(g, b))
    resumed = torch.Generator()
    resumed.set_state(saved)
    for b in range(2, 5):
        frames, views = step(resumed, b)
        assert torch.equal(frames, full[b][0]) and torch.equal(views, full[b][1])
    fresh = torch.Generator().manual_seed(123 * 1_000_003 + 7)
    assert torch.equal(step(fresh, 0)[0], full[0][0])
    assert not torch.equal(full[0][0], full[1][0][:8])
