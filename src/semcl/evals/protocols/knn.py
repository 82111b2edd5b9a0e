"""Weighted k-NN classification on the L2-normalised backbone features (InstDisc / DINO; semcl.evals.knn).

A column reads one k (`k: 20`, the default; 200 is the protocol's other value). Every run that has
a kNN column computes k = 20 and 200 and each column's k in one pass (the neighbours are shared).
T = eval.knn_temperature (None = 0.07).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.config import TOP_K
from semcl.evals.protocols.spec import Column, Evaluation
from semcl.schema import POSITIVE

log = logging.getLogger("semcl.evaluate")
DEFAULT_K = 20
PROTOCOL_KS = (20, 200)
DEFAULT_TEMPERATURE = 0.07


@dataclass
class ColumnFields:
    k: int | None = field(default=None, metadata=POSITIVE)  # neighbours (None = DEFAULT_K)


@dataclass
class Settings:
    # the ks computed in one pass (None = off) and the temperature T (None = DEFAULT_TEMPERATURE)
    knn: list[int] | None = field(default=None, metadata=TOP_K)
    knn_temperature: float | None = field(default=None, metadata=POSITIVE)


def _k(column: Column) -> int:
    return DEFAULT_K if column.k is None else column.k


def validate(column: Column, where: str) -> None:
    """k's type and sign are checked by the column schema (a positive integer); nothing else to check."""


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"knn_top1_k{_k(column)}"


def describe(column: Column) -> str:
    return (f"weighted {_k(column)}-NN top-1 on L2-normalised backbone features (cosine, weights exp(s/T), "
            f"T = eval.knn_temperature, default {DEFAULT_TEMPERATURE}; training images as memory, test transform)")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so the run ids of tables without a kNN column stay put
        ev["knn"] = sorted({*PROTOCOL_KS, *(_k(c) for c in columns)})


def run(ctx) -> dict[str, float]:
    from semcl.evals.knn import knn_accuracy

    temperature = ctx.cfg.eval.knn_temperature or DEFAULT_TEMPERATURE
    acc = knn_accuracy(ctx.train_features, ctx.train.labels, ctx.test_features, ctx.test.labels,
                       ks=tuple(ctx.cfg.eval.knn), temperature=temperature, num_classes=ctx.train.num_classes)
    log.info("kNN (T=%g): %s", temperature, {k: round(100 * v, 2) for k, v in acc.items()})
    return {f"knn_top1_k{k}": 100.0 * v for k, v in acc.items()}


EVALUATION = Evaluation("knn", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.knn), run=run,
                        settings=Settings)
