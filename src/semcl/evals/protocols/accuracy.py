"""The trained classifier's top-1 on its raw logits (no class prior), overall or per shot group.

Runs for every method with a classifier (whatever the columns): its test logits are saved for the
logit-sum ensembles, and `head_top1` is always recorded. Shot groups split the classes by training
images per class under one of two conventions (THRESHOLDS); a column reads one group.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
SHOT_GROUPS = ("overall", "many", "medium", "few")
THRESHOLDS = {"paco": "many > 100, 20 <= medium <= 100, few < 20 training images",
              "oltr": "many >= 100, 20 < medium < 100, few <= 20 training images"}


@dataclass
class ColumnFields:
    group: str | None = None  # overall | many | medium | few
    thresholds: str = "paco"  # the shot-group convention (THRESHOLDS)


@dataclass
class Settings:
    # the shot-group conventions computed (None = none: head_top1 only)
    accuracy: list[str] | None = None


def validate(column: Column, where: str) -> None:
    if column.group not in SHOT_GROUPS or column.thresholds not in THRESHOLDS:
        raise column_error(column, where, f"accuracy needs 'group' in {list(SHOT_GROUPS)} and 'thresholds' in "
                                          f"{sorted(THRESHOLDS)} (got group {column.group!r}, thresholds "
                                          f"{column.thresholds!r})")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    plain = column.group == "overall" or column.thresholds == "paco"
    return f"acc_{column.group}" + ("" if plain else f"_{column.thresholds}")


def describe(column: Column) -> str:
    where = "all test images" if column.group == "overall" else \
        f"mean per-class accuracy of {column.group} classes ({THRESHOLDS[column.thresholds]})"
    return f"top-1 of the raw classifier logits (no prior), {where}, last epoch"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so older run ids stay put
        ev["accuracy"] = sorted({c.thresholds for c in columns})


def logit_metrics(logits, labels, train_counts, conventions: list[str]) -> dict[str, float]:
    """Top-1 of raw logits, and per shot-group convention the overall / many / medium / few accuracy."""
    from semcl.evals.accuracy import shot_group_accuracy, topk_accuracy

    metrics = {"head_top1": topk_accuracy(logits, labels, ks=(1,))[1]}
    for convention in conventions:
        groups = shot_group_accuracy(logits.argmax(dim=1), labels, train_counts, convention=convention)
        suffix = "" if convention == "paco" else f"_{convention}"
        metrics["acc_overall"] = groups["overall"]
        for g in ("many", "medium", "few"):  # a group without a class (e.g. few at IF 10) has no accuracy:
            # null in the record (the table shows —), never NaN, which the store refuses as a failed number
            metrics[f"acc_{g}{suffix}"] = None if math.isnan(groups[g]) else groups[g]
        log.info("accuracy (%s): %s", convention, {k: round(v, 2) for k, v in groups.items()})
    return metrics


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.evals.protocols.context import outputs

    logits = outputs(ctx.classify, ctx.test.images, ctx.test_transform)  # raw logits: no class prior at test time
    counts = torch.bincount(ctx.train.labels, minlength=ctx.train.num_classes)
    metrics = logit_metrics(logits, ctx.test.labels, counts, ctx.cfg.eval.accuracy or [])
    if ctx.logits_path is not None and ctx.save is not None:  # what ensembles sum
        ctx.save({"logits": stored_logits(logits), "labels": ctx.test.labels.clone(), "train_counts": counts},
                 ctx.logits_path)
    return metrics


def stored_logits(logits):
    """float16 (half the file) when every logit stays finite in it, else float32: a logit beyond
    float16's 65504 would become inf, and an ensemble's sum of +inf and -inf NaN."""
    import torch

    half = logits.half()
    return half if bool(torch.isfinite(half).all()) or not bool(torch.isfinite(logits).all()) else logits.float()


EVALUATION = Evaluation("accuracy", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(method.has_classifier), run=run,
                        settings=Settings, choices={"accuracy": frozenset(THRESHOLDS)})
