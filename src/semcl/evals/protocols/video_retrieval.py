"""Nearest-neighbour video retrieval: test videos query the training videos by cosine similarity
of the backbone features averaged over eval.video_clips clips (not for fine-tuned classifiers) (None = 10); R@k on class labels
(a hit when any of the k nearest has the query's class) and AP (semcl.evals.retrieval). The mean
precision–recall curve is written to the run folder as video_pr_curve.csv (Fig. 6)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.config import TOP_K
from semcl.csv_files import write_csv
from semcl.evals.protocols.retrieval import DEFAULT_KS, recall_k
from semcl.evals.protocols.spec import Column, Evaluation, column_error
from semcl.evals.protocols.video_accuracy import DEFAULT_CLIPS, quick_clips, uses_clip_classifier
from semcl.schema import POSITIVE, at_most

log = logging.getLogger("semcl.evaluate")
PR_FILE = "video_pr_curve.csv"


@dataclass
class ColumnFields:
    measure: str | None = None  # R@k | AP, as retrieval's


@dataclass
class Settings:
    video_retrieval: list[int] | None = field(default=None, metadata=TOP_K)  # the ks (None = off)
    # clips per test video (None = DEFAULT_CLIPS); declared alike in video_accuracy
    video_clips: int | None = field(default=None, metadata={**POSITIVE, **at_most(1_000)})


def validate(column: Column, where: str) -> None:
    if column.measure != "AP" and (column.measure is None or recall_k(column.measure) is None):
        raise column_error(column, where, f"key 'measure' = {column.measure!r}: video retrieval measures are "
                                          "'AP' and 'R@k' with an integer k >= 1")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"video_retrieval_{column.measure}"


def describe(column: Column) -> str:
    return f"video retrieval {column.measure} on class labels (test videos query train videos, clip-averaged features)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:
        ks = {recall_k(c.measure) for c in columns} - {None}
        ev["video_retrieval"] = sorted(ks | set(DEFAULT_KS))


def run(ctx) -> dict[str, float]:
    from semcl.data import stats
    from semcl.data.video import ClipSampler
    from semcl.evals.retrieval import retrieval_scores
    from semcl.evals.video_clips import video_outputs
    from semcl.methods.clips import clip_sampler_of

    m = ctx.method
    k = ctx.cfg.eval.video_clips or DEFAULT_CLIPS
    sampler = clip_sampler_of(m) or ClipSampler()
    mean_std = stats(ctx.cfg.data.name)
    feats = {s: video_outputs(lambda x: m.features(x.to(ctx.device)).cpu(), getattr(ctx, s), sampler, k, *mean_std)
             for s in ("train", "test")}
    scores, curve = retrieval_scores(feats["test"], ctx.test.labels, feats["train"], ctx.train.labels,
                                     ks=tuple(ctx.cfg.eval.video_retrieval), return_curve=True)
    if ctx.logits_path is not None:  # the run folder
        rows = ((i + 1, f"{r:.6f}", f"{p:.6f}") for i, (r, p) in enumerate(zip(curve["recall"], curve["precision"],
                                                                                 strict=True)))
        write_csv(ctx.logits_path.parent / PR_FILE, ("cutoff", "recall", "precision"), rows)
    log.info("video retrieval: %s", {key: round(100 * v, 2) for key, v in scores.items()})
    return {f"video_retrieval_{key}": 100.0 * v for key, v in scores.items()}


EVALUATION = Evaluation("video_retrieval", ColumnFields, validate, metric_key, describe, eval_config,
                        # a fine-tuned classifier's features are not what the table retrieves with (the pre-trained ones are)
                        enabled=lambda cfg, method: bool(cfg.eval.video_retrieval)
                        and not uses_clip_classifier(method), run=run,
                        settings=Settings, quick=quick_clips)
