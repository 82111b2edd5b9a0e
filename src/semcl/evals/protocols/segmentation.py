"""Semantic segmentation mIoU, single-scale and multi-scale (GPaCo Sec. IV-D).

A column sets `inference`: single_scale (the test image at its decode size) or multi_scale (mean
softmax over MS_SCALES x horizontal flip, mmseg's usual aug-test ratios; the paper's exact ratios
are unknown). The method must offer `segment(x)` (logits at the input size).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error
from semcl.schema import POSITIVE

log = logging.getLogger("semcl.evaluate")
INFERENCE = {"single_scale": "miou_ss", "multi_scale": "miou_ms"}
MS_SCALES = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]  # mmseg's aug-test img_ratios (an assumption, docs/papers/paco.md §f)


@dataclass
class ColumnFields:
    inference: str | None = None  # single_scale | multi_scale (INFERENCE)


@dataclass
class Settings:
    seg_scales: list[float] | None = field(default=None, metadata=POSITIVE)  # test scales (1.0 alone = single; None = off)


def validate(column: Column, where: str) -> None:
    if column.inference not in INFERENCE:
        raise column_error(column, where, f"key 'inference' = {column.inference!r} is not one of {list(INFERENCE)}")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return INFERENCE[column.inference]


def describe(column: Column) -> str:
    how = "single scale" if column.inference == "single_scale" else f"scales {MS_SCALES} + flip, mean softmax"
    return f"mIoU (%) on the test split's label maps, {how}"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so other tables keep their run ids
        ms = any(c.inference == "multi_scale" for c in columns)
        ev["seg_scales"] = MS_SCALES if ms else [1.0]


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.evals.segmentation import confusion, mean_iou, multi_scale_logits

    method, scales = ctx.method, list(ctx.cfg.eval.seg_scales)
    test, c = ctx.test, ctx.method.info.num_classes
    tf = ctx.test_transform
    gen = torch.Generator().manual_seed(0)
    conf_ss = torch.zeros(c, c, dtype=torch.int64)
    conf_ms = torch.zeros(c, c, dtype=torch.int64)
    bs = 8
    for i in range(0, len(test), bs):
        rows = torch.arange(i, min(i + bs, len(test)))
        x = tf(test.images[rows], gen).to(ctx.device)
        y = test.masks[rows]
        conf_ss += confusion(method.segment(x).argmax(1).cpu(), y, c)
        if scales != [1.0]:
            conf_ms += confusion(multi_scale_logits(method.segment, x, scales, flip=True).argmax(1).cpu(), y, c)
    out = {"miou_ss": mean_iou(conf_ss)}
    if scales != [1.0]:
        out["miou_ms"] = mean_iou(conf_ms)
    log.info("segmentation: %s", out)
    return out


EVALUATION = Evaluation("segmentation", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.seg_scales) and method.has_segmenter, run=run,
                        settings=Settings)
