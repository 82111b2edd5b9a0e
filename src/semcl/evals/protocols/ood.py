"""Out-of-distribution detection: AUROC of the class-Gaussian max log-density (semcl.evals.ood).

A profile may substitute the OOD set (`substitute: {cifar10: mnist}`) or drop it (null).
A column may restrict its set to a named class subset (`classes: outliers20`: TinyImageNet's 20
outlier classes, RINCE docs/papers/rince.md §g.7). Every run with that OOD set also measures each subset of it
(a subset of the same features), so such a column changes neither the eval config nor run ids."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.config import IMAGES
from semcl.data.imagenet100 import OOD_CLASS_SUBSETS
from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")


@dataclass
class ColumnFields:
    out: str | None = None  # the out-of-distribution set
    classes: str | None = None  # only these classes of `out` (semcl.data.imagenet100.OOD_CLASS_SUBSETS)


@dataclass
class Settings:
    ood: list[str] = field(default_factory=list)  # out-of-distribution dataset names
    ood_limit: int | None = field(default=None, metadata=IMAGES)  # first N images of each OOD test set


def validate(column: Column, where: str) -> None:
    if not column.out:
        raise column_error(column, where, "ood needs 'out' (the out-of-distribution dataset)")
    if column.classes is not None:
        if column.classes not in OOD_CLASS_SUBSETS:
            raise column_error(column, where, f"key 'classes' = {column.classes!r} is not one of "
                                              f"{sorted(OOD_CLASS_SUBSETS)}")
        base = OOD_CLASS_SUBSETS[column.classes][0]
        if column.out != base:
            raise column_error(column, where, f"key 'classes' = {column.classes!r} restricts {base}, not {column.out!r}")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    out = substitute.get(column.out, column.out)
    if out is None or (column.classes and out != column.out):  # a substituted set has not these classes
        return None
    return f"ood_auroc_{out}" + (f"_{column.classes}" if column.classes else "")


def describe(column: Column) -> str:
    only = f" ({column.classes} classes only)" if column.classes else ""
    return f"OOD AUROC vs {column.out}{only} (class-Gaussian max log-density)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    ev["ood"] = sorted({substitute.get(c.out, c.out) for c in columns})  # always written, like linear_probe


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.data import conform, load
    from semcl.data.ood_subsets import ood_subset_rows
    from semcl.evals.ood import class_gaussian_auroc

    metrics = {}
    channels = ctx.train.images.shape[1]
    for name in ctx.cfg.eval.ood:
        # file-backed OOD sets (AwA2, ImageNet outlier splits) decode straight at the model's input size;
        # conform then only adapts the in-memory sets (28 px MNIST to a 32 px model)
        out = conform(load(name, ctx.data_root, "test", ctx.size), channels=channels, size=ctx.size)
        limit = ctx.cfg.eval.ood_limit
        subsets = {s: ood_subset_rows(s, out.labels, ctx.data_root) for s, (base, _) in OOD_CLASS_SUBSETS.items()
                   if base == name}
        if limit:  # the limit cuts the whole set; a subset keeps its own first `limit` images
            keep = torch.zeros(len(out.labels), dtype=torch.bool)
            keep[:limit] = True
            for rows in subsets.values():
                keep[rows[:limit]] = True
            out = out.subset(torch.nonzero(keep, as_tuple=True)[0])
            position = torch.cumsum(keep.long(), 0) - 1  # old row -> row of the cut set
            subsets = {s: position[rows[:limit]] for s, rows in subsets.items()}
        out_f = ctx.features_of(out.images)
        full = torch.arange(min(limit, len(out.labels))) if limit else torch.arange(len(out.labels))
        for key, rows in ((f"ood_auroc_{name}", full),
                          *((f"ood_auroc_{name}_{s}", rows) for s, rows in subsets.items())):
            metrics[key] = 100.0 * class_gaussian_auroc(ctx.train_features, ctx.train.labels,
                                                        ctx.test_features, out_f[rows])
            log.info("OOD %s: AUROC %.2f", key[len("ood_auroc_"):], metrics[key])
    return metrics


EVALUATION = Evaluation("ood", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.ood), run=run,
                        settings=Settings, quick=lambda section: {"ood_limit": 8})
