"""Cosine retrieval, test images as queries against the training set: Recall@k and AP (semcl.evals.retrieval)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from semcl.config import TOP_K
from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
LABEL_SETS = ("fine", "coarse")
DEFAULT_KS = (1, 5, 10, 20)  # the default of Settings.retrieval_ks
_RECALL = re.compile(r"^R@([1-9][0-9]*)$")


@dataclass
class ColumnFields:
    labels: str | None = None  # the label set (LABEL_SETS)
    measure: str | None = None  # R@k | AP


@dataclass
class Settings:
    retrieval: list[str] = field(default_factory=list)  # the label sets retrieved with
    retrieval_ks: list[int] = field(default_factory=lambda: list(DEFAULT_KS), metadata=TOP_K)


def recall_k(measure: str) -> int | None:
    """k of an "R@k" measure; None for "AP"."""
    m = _RECALL.match(measure)
    return int(m[1]) if m else None


def validate(column: Column, where: str) -> None:
    if column.labels not in LABEL_SETS:
        raise column_error(column, where, f"key 'labels' = {column.labels!r}: retrieval needs one of {list(LABEL_SETS)}")
    if column.measure != "AP" and (column.measure is None or recall_k(column.measure) is None):
        raise column_error(column, where, f"key 'measure' = {column.measure!r}: retrieval measures are 'AP' and "
                                          "'R@k' with an integer k >= 1 (e.g. 'R@1')")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"retrieval_{column.labels}_{column.measure}"


def describe(column: Column) -> str:
    return f"retrieval {column.measure}, {column.labels} labels (test queries, train database)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    ev["retrieval"] = sorted({c.labels for c in columns})
    # an R@k outside the cutoffs computed so far is added to them (the default cutoffs are left
    # alone when they already cover every column, so existing run ids stay put)
    ks = list(ev.get("retrieval_ks", DEFAULT_KS))
    wanted = {recall_k(c.measure) for c in columns} - {None} - set(ks)
    if wanted:
        ev["retrieval_ks"] = sorted({*ks, *wanted})


def _labels(s, which: str):
    if which == "fine":
        return s.labels
    if s.coarse_labels is None:
        raise ValueError(f"dataset {s.name} has no coarse labels for coarse retrieval")
    return s.coarse_labels


def run(ctx) -> dict[str, float]:
    from semcl.evals.retrieval import retrieval_scores

    metrics = {}
    for which in ctx.cfg.eval.retrieval:
        scores = retrieval_scores(ctx.test_features, _labels(ctx.test, which), ctx.train_features,
                                  _labels(ctx.train, which), ks=tuple(ctx.cfg.eval.retrieval_ks))
        for k, v in scores.items():
            metrics[f"retrieval_{which}_{k}"] = 100.0 * v
        log.info("retrieval %s: %s", which, {k: round(100 * v, 2) for k, v in scores.items()})
    return metrics


EVALUATION = Evaluation("retrieval", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.retrieval), run=run,
                        settings=Settings, choices={"retrieval": frozenset(LABEL_SETS)})
