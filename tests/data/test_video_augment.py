"""Clip augmentation: one crop / flip / jitter / grey per clip, the same on all of its frames."""

from __future__ import annotations

import math

import torch

from semcl.data.video import VIDEO_RECIPE, ClipAugment
from semcl.data.views.augment import Recipe


def test_identical_frames_stay_identical_through_the_full_recipe() -> None:
    g = torch.Generator().manual_seed(0)
    frame = torch.randint(0, 256, (4, 3, 1, 20, 24), dtype=torch.uint8, generator=g)
    out = ClipAugment(VIDEO_RECIPE, size=8)(frame.expand(-1, -1, 5, -1, -1).contiguous(), g)
    assert out.shape == (4, 3, 5, 8, 8)
    for t in range(1, 5):
        assert torch.equal(out[:, :, t], out[:, :, 0])
    assert not torch.allclose(out[0], out[1])  # different clips get different parameters


def test_crop_box_matches_hand_computation_on_every_frame() -> None:
    # area 1/4 of 8x8 at ratio 1: a 4x4 box; position floor(u·5) from the generator's 3rd draw
    recipe = Recipe(crop_scale=(0.25, 0.25), crop_ratio=(1.0, 1.0), flip_p=1.0)
    base = torch.arange(64, dtype=torch.float64).view(8, 8)
    # frame t = base + 3t, so each frame is distinguishable and the crop must be the same box
    clips = (base + 3 * torch.arange(4, dtype=torch.float64).view(4, 1, 1)).to(torch.uint8)
    clips = clips.view(1, 1, 4, 8, 8).expand(2, 1, 4, 8, 8).contiguous()
    aug = ClipAugment(recipe, size=4, mean=(0.0,), std=(1 / 255,))  # output = pixel values
    out = aug(clips, torch.Generator().manual_seed(5))

    hand = torch.Generator().manual_seed(5)
    torch.rand((2, 10), generator=hand, dtype=torch.float64)  # area fractions (fixed at 1/4)
    torch.rand((2, 10), generator=hand, dtype=torch.float64)  # log-ratios (fixed at 0)
    u = torch.rand((2, 2), generator=hand, dtype=torch.float64)
    for k in range(2):
        top, left = math.floor(u[k, 0] * 5), math.floor(u[k, 1] * 5)
        for t in range(4):
            want = (base[top:top + 4, left:left + 4] + 3 * t).flip(-1)  # flip_p = 1
            assert torch.allclose(out[k, 0, t].double(), want, atol=1e-3)


def test_clip_contrast_blends_with_the_clip_mean() -> None:
    recipe = Recipe(crop_scale=None, jitter_p=1.0, contrast=0.5)
    g = torch.Generator().manual_seed(1)
    clips = torch.tensor([[10, 30], [50, 70]], dtype=torch.uint8).view(1, 1, 2, 2, 1).expand(1, 1, 2, 2, 2)
    clips = clips.contiguous()  # two frames with different means; 1 channel; square 2x2 frames
    out = ClipAugment(recipe, size=2, mean=(0.0,), std=(1.0,))(clips, g)
    hand = torch.Generator().manual_seed(1)
    torch.rand(1, generator=hand)  # jitter chosen (p = 1)
    torch.rand(1, generator=hand)  # brightness factor (strength 0: unused)
    f = float(torch.rand(1, generator=hand) * 1.0 + 0.5)  # contrast factor uniform in [0.5, 1.5]
    x = clips[0, 0].double() / 255  # [T, 2, 2]
    want = (f * x + (1 - f) * x.mean()).clamp(0, 1)  # one mean for the whole clip, not per frame
    assert torch.allclose(out[0, 0].double(), want, atol=1e-6)
