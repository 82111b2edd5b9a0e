"""Alignment and uniformity of the test features (Wang & Isola 2020; semcl.evals.alignment), for RINCE's analysis of
how they trade off against OOD detection (experiments/rince/align-uniform.yaml).

A column reads one quantity (`quantity: alignment` or `uniformity`); every run with such a column computes both in one
pass over the test features the OOD and retrieval protocols read (backbone, before any head, L2-normalised). Positive
pairs are the test images of the same class (docs/papers/rince.md §f.6 says why); alpha = 2,
t = 2 as in Wang & Isola's experiments. Tables without such a column keep their run ids (`align_uniform` stays None).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
QUANTITIES = ("alignment", "uniformity")
# the closed range each can take on the unit sphere: ||u - v||^2 lies in [0, 4], so alignment (alpha 2) in [0, 4] and
# uniformity (t 2) = log of a mean of exp(-2 d^2) in [-8, 0]
BOUNDS = {"alignment": (0.0, 4.0), "uniformity": (-8.0, 0.0)}


@dataclass
class ColumnFields:
    quantity: str | None = None  # alignment | uniformity


@dataclass
class Settings:
    align_uniform: bool | None = None  # measure alignment and uniformity of the test features (None = off)


def validate(column: Column, where: str) -> None:
    if column.quantity not in QUANTITIES:
        raise column_error(column, where, f"key 'quantity' = {column.quantity!r}: alignment measures one of "
                                          f"{list(QUANTITIES)}")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"feature_{column.quantity}"


def describe(column: Column) -> str:
    if column.quantity == "alignment":
        return ("alignment (Wang & Isola 2020): mean ||f(x) - f(y)||^2 over same-class pairs of test images, "
                "L2-normalised backbone features; lower = more aligned")
    return ("uniformity (Wang & Isola 2020): log mean exp(-2 ||f(x) - f(y)||^2) over all pairs of test images, "
            "L2-normalised backbone features; lower = more uniform")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:
        ev["align_uniform"] = True


def run(ctx) -> dict[str, float]:
    from semcl.evals.alignment import alignment, uniformity

    feats = ctx.test_features
    out = {"feature_alignment": alignment(feats, ctx.test.labels), "feature_uniformity": uniformity(feats)}
    log.info("alignment %.4f, uniformity %.4f (%d test features)", out["feature_alignment"],
             out["feature_uniformity"], feats.shape[0])
    return out


EVALUATION = Evaluation("alignment", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.align_uniform), run=run,
                        settings=Settings, quick_test_per_class=2)  # a same-class pair
