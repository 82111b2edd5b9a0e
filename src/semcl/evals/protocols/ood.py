"""Out-of-distribution detection: AUROC of the class-Gaussian max log-density (semcl.evals.ood).

A profile may substitute the OOD set (`substitute: {cifar10: mnist}`) or drop it (null)."""

from __future__ import annotations

import logging
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")


def validate(column: Column, where: str) -> None:
    if not column.out:
        raise column_error(column, where, "ood needs 'out' (the out-of-distribution dataset)")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    out = substitute.get(column.out, column.out)
    return None if out is None else f"ood_auroc_{out}"


def describe(column: Column) -> str:
    return f"OOD AUROC vs {column.out} (class-Gaussian max log-density)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    ev["ood"] = sorted({substitute.get(c.out, c.out) for c in columns})  # always written, like linear_probe


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.data import conform, load
    from semcl.evals.ood import class_gaussian_auroc

    metrics = {}
    channels = ctx.train.images.shape[1]
    for name in ctx.cfg.eval.ood:
        out = conform(load(name, ctx.data_root, "test"), channels=channels, size=ctx.size)
        if ctx.cfg.eval.ood_limit:
            out = out.subset(torch.arange(min(ctx.cfg.eval.ood_limit, len(out.labels))))
        out_f = ctx.features_of(out.images)
        metrics[f"ood_auroc_{name}"] = 100.0 * class_gaussian_auroc(ctx.train_features, ctx.train.labels,
                                                                    ctx.test_features, out_f)
        log.info("OOD %s: AUROC %.2f", name, metrics[f"ood_auroc_{name}"])
    return metrics


EVALUATION = Evaluation("ood", frozenset({"out"}), validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.ood), run=run)
