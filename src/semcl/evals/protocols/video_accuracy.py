"""Top-1 of a fine-tuned video classifier on the test videos, clip logits averaged per video
(docs/papers/rince.md §f.4). Read from methods with `has_clip_classifier` (`classify_clips(x)`, clips at
`clip_sampler`'s positions); clips per video: eval.video_clips (None = 10, a common choice; the paper's number is unknown)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation
from semcl.schema import POSITIVE, at_most

DEFAULT_CLIPS = 10


@dataclass
class Settings:
    video_accuracy: bool | None = None  # None = off
    # clips per test video (None = DEFAULT_CLIPS); declared alike in video_retrieval
    video_clips: int | None = field(default=None, metadata={**POSITIVE, **at_most(1_000)})


def validate(column: Column, where: str) -> None:
    pass


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return "video_top1"


def describe(column: Column) -> str:
    return "top-1 on the test videos, logits averaged over evenly spaced clips per video (eval.video_clips)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:
        ev["video_accuracy"] = True


def run(ctx) -> dict[str, float]:
    from semcl.data import stats
    from semcl.data.video import ClipSampler
    from semcl.evals.video_clips import video_outputs
    from semcl.methods.clips import clip_sampler_of

    m = ctx.method
    k = ctx.cfg.eval.video_clips or DEFAULT_CLIPS
    logits = video_outputs(lambda x: m.classify_clips(x.to(ctx.device)).cpu(), ctx.test,
                           clip_sampler_of(m) or ClipSampler(), k, *stats(ctx.cfg.data.name))
    top1 = (logits.argmax(dim=1) == ctx.test.labels).double().mean().item()
    return {"video_top1": 100.0 * top1}


def quick_clips(section) -> dict:
    """`semcl check`'s clips per test video (both video evaluations): 2 evenly spaced, not 10 (the same multi-clip
    averaging; r3d_18: ~1 s a clip)."""
    return {"video_clips": min(2, getattr(section, "video_clips", None) or 2)}


def uses_clip_classifier(method) -> bool:
    """Whether the built method is a fine-tuned clip classifier (video accuracy reads it; video retrieval skips it)."""
    from semcl.methods.clips import has_clip_classifier  # torch: only once a method is built

    return has_clip_classifier(method)


EVALUATION = Evaluation("video_accuracy", None, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.video_accuracy)
                        and uses_clip_classifier(method), run=run,
                        settings=Settings, quick=quick_clips)
