"""Robustness of the classifier on ImageNet-C / ImageNet-R / ImageNet-Sketch (GPaCo Sec. IV-C).

A column names the set (`testset`: imagenet_c | imagenet_r | imagenet_sketch) and the number
(`score`: top1 | error, and for imagenet_c also mce | mce_alexnet; semcl.evals.robustness has the
formulas). Test images go through the run's test transform (Resize 256 -> CenterCrop 224 at paper
scale, the training set's statistics). A set's classes are matched to the model's by wnid; ImageNet-R
scores only the logits of its 200 classes (the fixed mask of the official evaluation).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.config import IMAGES
from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
SETS = ("imagenet_c", "imagenet_r", "imagenet_sketch")
MEASURES = {"top1": "top-1 (%)", "error": "top-1 error (%)", "mce": "mCE, unnormalised (%)",
            "mce_alexnet": "mCE normalised by AlexNet's errors (Hendrycks & Dietterich)"}


@dataclass
class ColumnFields:
    testset: str | None = None  # SETS
    score: str | None = None  # MEASURES


@dataclass
class Settings:
    robustness: list[str] | None = None  # the test sets scored (None = off)
    # first N images of each scored set (ImageNet-C: of each corruption x severity); the preflight's few
    robustness_limit: int | None = field(default=None, metadata=IMAGES)


def validate(column: Column, where: str) -> None:
    if column.testset not in SETS:
        raise column_error(column, where, f"key 'testset' = {column.testset!r} is not one of {list(SETS)}")
    allowed = list(MEASURES) if column.testset == "imagenet_c" else ["top1", "error"]
    if column.score not in allowed:
        raise column_error(column, where, f"key 'score' = {column.score!r} is not one of {allowed}")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    out = substitute.get(column.testset, column.testset)
    return None if out is None else f"{out}_{column.score}"


def describe(column: Column) -> str:
    return f"{MEASURES[column.score]} of the raw classifier logits on {column.testset}" + \
        (" (200-class logit mask)" if column.testset == "imagenet_r" else "")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so other tables keep their run ids
        ev["robustness"] = sorted({substitute.get(c.testset, c.testset) for c in columns})


def _label_map(set_classes: list[str], model_classes: list[str], where: str):
    """int64 [K_set]: the model's index of each of the set's wnids; DataError if one is unknown."""
    import torch

    from semcl.errors import DataError

    index = {c: i for i, c in enumerate(model_classes)}
    unknown = [c for c in set_classes if c not in index]
    if unknown:
        raise DataError(f"{where}: class {unknown[0]} is not among the model's training classes")
    return torch.tensor([index[c] for c in set_classes], dtype=torch.int64)


def _score(ctx, s, where: str, r_mask=None) -> float:
    """Top-1 (%) of the classifier on FileImageSet `s` (labels mapped to the model's classes)."""
    import torch

    from semcl.evals.protocols.context import outputs
    from semcl.evals.robustness import top1

    limit = ctx.cfg.eval.robustness_limit
    if limit:  # every set is still read and scored, on its first `limit` images
        s = s.subset(slice(0, limit))
    logits = outputs(ctx.classify, s.images, ctx.test_transform)
    labels = _label_map(s.class_names, list(ctx.train.class_names), where)[s.labels]
    if r_mask is None:
        return top1(logits, labels)
    pos = {int(c): k for k, c in enumerate(r_mask.tolist())}  # model class -> column of the mask
    return top1(logits, torch.tensor([pos[int(y)] for y in labels]), r_mask)


def run(ctx) -> dict[str, float]:
    from semcl.data import dataset_spec, ensure_synthetic, load
    from semcl.data.sets.robustness import CORRUPTIONS, SEVERITIES, alexnet_errors, imagenet_r_wnids, read_corruption
    from semcl.evals.robustness import mce_alexnet, mce_unnormalised

    cfg, metrics = ctx.cfg, {}
    names = list(cfg.eval.robustness or [])
    if cfg.data.synthetic:  # the synthetic data root holds the training set only until now
        ensure_synthetic(ctx.data_root, names, train_per_class=cfg.data.synthetic_train_per_class,
                         test_per_class=cfg.data.synthetic_test_per_class)
    model_classes = list(ctx.train.class_names)
    for name in names:
        if name == "imagenet_c":
            spec = dataset_spec(name)
            errors: dict[str, list[float]] = {}
            for c in CORRUPTIONS:
                errors[c] = [100.0 - _score(ctx, read_corruption(spec, ctx.data_root, c, s, ctx.size),
                                            f"{ctx.data_root / spec.folder / c / str(s)}")
                             for s in SEVERITIES]
                metrics[f"imagenet_c_error_{c}"] = sum(errors[c]) / len(SEVERITIES)
            err = sum(sum(e) for e in errors.values()) / (len(CORRUPTIONS) * len(SEVERITIES))
            metrics.update(imagenet_c_error=err, imagenet_c_top1=100.0 - err, imagenet_c_mce=mce_unnormalised(errors),
                           imagenet_c_mce_alexnet=mce_alexnet(errors, alexnet_errors()))
        else:
            s = load(name, ctx.data_root, "test", ctx.size)
            where = str(ctx.data_root / dataset_spec(name).folder)
            mask = None
            if name == "imagenet_r":
                listed = imagenet_r_wnids()
                # a model trained on real ImageNet: the official fixed 200-class mask; a synthetic or
                # other class list: the model's classes that ImageNet-R's folders hold
                keep = listed if set(listed) <= set(model_classes) else sorted(s.class_names)
                mask = _label_map(keep, model_classes, where)
            acc = _score(ctx, s, where, mask)
            metrics.update({f"{name}_top1": acc, f"{name}_error": 100.0 - acc})
        log.info("robustness %s: %s", name, {k: round(v, 2) for k, v in metrics.items() if k.startswith(name)})
    return metrics


EVALUATION = Evaluation("robustness", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.robustness) and method.has_classifier, run=run,
                        # ImageNet-C is 75 sets (corruption x severity): one image each runs every reader and score (a
                        # ViT-L at 64 px: ~0.15 s an image)
                        settings=Settings, quick=lambda section: {"robustness_limit": 1})
