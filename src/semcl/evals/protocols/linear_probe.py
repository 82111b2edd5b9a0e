"""Linear probe on the frozen backbone (RINCE protocol): a column reads top-1 at the last or the best probe epoch."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
EPOCHS = ("last", "best")


@dataclass
class ColumnFields:
    epoch: str = "last"  # the probe epoch the number is read at (EPOCHS)


@dataclass
class Settings:
    linear_probe: bool = True


def validate(column: Column, where: str) -> None:
    if column.epoch not in EPOCHS:
        raise column_error(column, where, f"key 'epoch' = {column.epoch!r} is not one of {list(EPOCHS)}")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return f"linear_top1_{column.epoch}"


def describe(column: Column) -> str:
    return f"linear probe top-1, {column.epoch} probe epoch"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    ev["linear_probe"] = bool(columns)  # always written: a table without the column turns the probe off


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.evals.linear_probe import linear_probe

    p = ctx.cfg.probe
    with torch.enable_grad():
        res = linear_probe(
            ctx.encode, ctx.train.images, ctx.train.labels, ctx.test.images, ctx.test.labels,
            num_classes=ctx.train.num_classes, train_transform=ctx.transform(p.recipe or "crop_flip"),
            # file-backed sets: crops from the whole images, not from the evaluation's centre crop
            train_views_from=getattr(ctx.train, "train_images", None), init=p.init or "uniform",
            test_transform=ctx.test_transform, epochs=p.epochs, lr=p.lr, batch_size=p.batch_size,
            momentum=p.momentum, weight_decay=p.weight_decay, milestones=tuple(p.milestones), gamma=p.gamma,
            augment=p.augment, seed=ctx.seed, checkpoint=ctx.checkpoint("probe"),
            # the shared feature passes (retrieval, kNN and OOD read the same ones): one pass per split
            test_feats=ctx.test_features if isinstance(ctx.test.images, torch.Tensor) else None,
            train_feats=ctx.train_features if not p.augment and isinstance(ctx.train.images, torch.Tensor) else None)
    log.info("linear probe: last %.2f best %.2f", res.top1_last, res.top1_best)
    return {"linear_top1_last": res.top1_last, "linear_top1_best": res.top1_best}


EVALUATION = Evaluation("linear_probe", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.linear_probe), run=run,
                        settings=Settings)
