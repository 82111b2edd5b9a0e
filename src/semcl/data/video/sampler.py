"""Temporal clip positions for RINCE's video ranks: x_f, x_s and x_v of each anchor video.

RINCE (docs/papers/rince.md §c.6, §d.3, paper prose): all clips are ``T = 16`` frames at temporal stride 3
(a clip spans ``S = (T − 1)·3 + 1 = 46`` frames); rank 1 is x_f, the anchor clip under another
augmentation (same frames as the anchor); rank 2 is x_s; rank 3 is x_v, a clip of the same video
"at least 48 frames away" from x_f and x_s. Named assumptions (the paper gives no code):

* **x_s** (``positive``): ``"nearby"`` (default) -- a temporal crop whose start is the anchor's
  shifted by an integer uniform in ``[−max_shift, max_shift]`` (default 24 ≈ half a clip span, so
  x_s overlaps x_f by at least half), clamped to the video; ``"shuffled"`` -- the anchor clip's
  own frames in a random temporal order (the other candidate §c.6 names).
* **distance** (``gap_measure``): ``"start"`` (default) -- ``|start(x_v) − start(x)| ≥ min_gap``
  for x ∈ {x_f, x_s}; with the defaults 48 = T·stride, so x_v never shares a frame with them;
  ``"edge"`` -- at least ``min_gap`` frames strictly between the clips (``|Δstart| ≥ min_gap + S``).
* **feasibility**: the anchor start is drawn uniformly among the starts that leave room for x_v
  whatever x_s's shift turns out to be (``a ≤ M − G − h`` or ``a ≥ G + h``, with ``M`` the last
  start, ``G`` the required start distance and ``h`` the x_s shift range); then x_s; then x_v
  uniformly among the starts far enough from both.
* **fallback "farthest"** (a video too short for any such triple: ``M < G + h``, i.e. fewer
  than 46 + 48 + 24 = 118 frames with the defaults): anchor uniform over all starts, x_s as usual,
  and where no start is far enough from both, x_v at the end of the video farther from them
  (start 0 or ``M``); ``gap_ok`` is False for those rows so a loss may drop their rank-3 term.
* A video shorter than one span repeats its last frame (indices clamp to ``n − 1``).

Randomness: all draws come from the ``torch.Generator`` passed in (the engine's per-epoch CPU
generator), a fixed number per batch, so a run resumed from a saved generator state samples the
same clips.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

POSITIVES = ("nearby", "shuffled")
GAP_MEASURES = ("start", "edge")


@dataclass(frozen=True)
class ClipPlan:
    """Sampled clips of one batch: ``frames`` int64 ``[B, 3, T]`` (x_f, x_s, x_v), ``starts`` ``[B, 3]``,
    ``gap_ok`` bool ``[B]`` (False where the short-video fallback placed x_v)."""

    frames: torch.Tensor
    starts: torch.Tensor
    gap_ok: torch.Tensor


def _pick(u: torch.Tensor, lo_end: torch.Tensor, hi_start: torch.Tensor, last: torch.Tensor) -> tuple[
        torch.Tensor, torch.Tensor]:
    """Integer uniform over ``[0, lo_end] ∪ [hi_start, last]`` (each part may be empty) by ``u`` in [0, 1).

    Returns (value, non-empty). Overlapping parts are merged so no value counts twice.
    """
    n_lo = (torch.minimum(lo_end, last) + 1).clamp(min=0)
    hi_start = torch.maximum(hi_start, n_lo)
    n_hi = (last - hi_start + 1).clamp(min=0)
    total = n_lo + n_hi
    k = torch.minimum(torch.floor(u * total).long(), (total - 1).clamp(min=0))
    value = torch.where(k < n_lo, k, hi_start + (k - n_lo))
    return value, total > 0


@dataclass(frozen=True)
class ClipSampler:
    """Draws x_f / x_s / x_v clip positions for a batch of videos (see the module docstring)."""

    num_frames: int = 16
    stride: int = 3
    min_gap: int = 48
    gap_measure: str = "start"
    positive: str = "nearby"
    max_shift: int = 24

    def __post_init__(self) -> None:
        if self.num_frames < 1 or self.stride < 1 or self.min_gap < 0 or self.max_shift < 0:
            raise ValueError(f"invalid clip sampler {self}")
        if self.positive not in POSITIVES:
            raise ValueError(f"positive must be one of {POSITIVES}, got {self.positive!r}")
        if self.gap_measure not in GAP_MEASURES:
            raise ValueError(f"gap_measure must be one of {GAP_MEASURES}, got {self.gap_measure!r}")

    @property
    def span(self) -> int:
        """Frames from a clip's first to its last frame, inclusive."""
        return (self.num_frames - 1) * self.stride + 1

    @property
    def start_gap(self) -> int:
        """Required ``|start(x_v) − start(x_f or x_s)|``."""
        return self.min_gap + (self.span if self.gap_measure == "edge" else 0)

    def clip_frames(self, starts: torch.Tensor, frame_counts: torch.Tensor) -> torch.Tensor:
        """int64 ``[..., T]`` frame indices of clips at ``starts`` ``[B, ...]``, clamped to each video."""
        offsets = torch.arange(self.num_frames, dtype=torch.int64) * self.stride
        idx = starts.unsqueeze(-1) + offsets
        top = (frame_counts.to(torch.int64) - 1).view(-1, *([1] * (idx.dim() - 1)))
        return torch.minimum(idx, top)

    def sample(self, frame_counts: torch.Tensor, generator: torch.Generator) -> ClipPlan:
        """Clip positions for videos with ``frame_counts`` ``[B]`` frames."""
        n = frame_counts.to(torch.int64).cpu()
        if (n < 1).any():
            raise ValueError("every video needs at least one frame")
        b = n.numel()
        u = torch.rand((b, 3), generator=generator, dtype=torch.float64)
        perm_keys = (torch.rand((b, self.num_frames), generator=generator)
                     if self.positive == "shuffled" else None)
        last = (n - self.span).clamp(min=0)  # M: last valid start
        g = self.start_gap
        h = self.max_shift if self.positive == "nearby" else 0
        # anchor: leave room for x_v on one side whatever the shift of x_s turns out to be
        a_ok, feasible = _pick(u[:, 0], last - g - h, torch.full_like(last, g + h), last)
        a_any = torch.minimum(torch.floor(u[:, 0] * (last + 1)).long(), last)
        a = torch.where(feasible, a_ok, a_any)
        if h:
            shift = torch.floor(u[:, 1] * (2 * h + 1)).long().clamp(max=2 * h) - h
            s = (a + shift).clamp(min=0).minimum(last)
        else:
            s = a
        lo, hi = torch.minimum(a, s), torch.maximum(a, s)
        v_ok, v_feasible = _pick(u[:, 2], lo - g, hi + g, last)
        # fallback "farthest": the video end farther from both clips
        v_far = torch.where(lo >= last - hi, torch.zeros_like(last), last)
        gap_ok = v_feasible  # an infeasible anchor may still leave room when x_s shifted inwards
        v = torch.where(gap_ok, v_ok, v_far)
        starts = torch.stack([a, s, v], dim=1)
        frames = self.clip_frames(starts, n)
        if perm_keys is not None:
            frames[:, 1] = frames[:, 0].gather(1, perm_keys.argsort(dim=1))
        return ClipPlan(frames, starts, gap_ok)

    def center_clips(self, frame_counts: torch.Tensor, clips_per_video: int = 1) -> torch.Tensor:
        """int64 ``[B, K, T]`` evenly spaced clips per video (the deterministic test-time sampling)."""
        n = frame_counts.to(torch.int64).cpu()
        last = (n - self.span).clamp(min=0)
        k = clips_per_video
        # clip j starts at round(last * (j + 0.5) / k): one clip = the centre clip
        pos = (torch.arange(k, dtype=torch.float64) + 0.5) / k
        starts = torch.round(last[:, None].double() * pos).long()
        return self.clip_frames(starts, n)
