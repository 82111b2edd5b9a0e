"""Per-video outputs averaged over evenly spaced test clips (the standard multi-clip protocol).

For video i with clips c_1..c_K (ClipSampler.center_clips: starts round(M·(j + ½)/K), M the last
start), each clip under the deterministic test transform (centre square resized to the frame
height, normalised): out(i) = (1/K) Σ_j fn(c_j). Accuracy averages the clip logits (then argmax);
retrieval averages the clip features.
"""

from __future__ import annotations

import torch

from semcl.data.video import ClipAugment, ClipSampler
from semcl.data.views.augment import Recipe


def video_outputs(fn, videos, sampler: ClipSampler, clips_per_video: int, mean, std,
                  batch_size: int = 16) -> torch.Tensor:
    """float32 ``[N, D]``: fn over each video's ``clips_per_video`` test clips, averaged per video."""
    test = ClipAugment(Recipe(), size=videos.images.shape[2], mean=mean, std=std)
    gen = torch.Generator().manual_seed(0)  # the test recipe draws nothing; kept for the signature
    frames = sampler.center_clips(videos.frame_counts, clips_per_video)  # [N, K, T]
    out = []
    for lo in range(0, len(videos), batch_size):
        idx = torch.arange(lo, min(lo + batch_size, len(videos)))
        clips = videos.clips(idx, frames[idx])  # [b, K, C, T, H, W]
        b, k = clips.shape[:2]
        x = test(clips.flatten(0, 1), gen)
        out.append(fn(x).float().view(b, k, -1).mean(dim=1))
    return torch.cat(out)
