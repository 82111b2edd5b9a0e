"""Per-stage linear probes (HSA Fig. 3): a column reads the last-epoch test top-1 of a linear probe on
the pooled features after one backbone stage (`method.stage_features`, pooling per
semcl.evals.stage_pooling), all stages trained together on the fly with the run's `probe` settings (recipe,
augment, init, lr, epochs, batch, momentum, weight decay, milestones, gamma), as the official per-layer probes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
STAGES = ("stem", "layer1", "layer2", "layer3", "layer4")


@dataclass
class ColumnFields:
    stage: str | None = None  # the backbone stage probed (STAGES)


@dataclass
class Settings:
    stage_probe: list[str] | None = None  # the stages probed (None = off)


def validate(column: Column, where: str) -> None:
    if column.stage not in STAGES:
        raise column_error(column, where, f"key 'stage' = {column.stage!r} is not one of {list(STAGES)}")


def _stage(column: Column, substitute: dict[str, str | None]) -> str | None:
    """The stage measured in this profile: a profile's `substitute` may rename it or drop it (null),
    e.g. `layer4: null` for a backbone with three stages."""
    return substitute.get(column.stage, column.stage)


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    stage = _stage(column, substitute)
    return None if stage is None else f"stage_probe_top1_{stage}"


def describe(column: Column) -> str:
    return (f"linear probe top-1 on the pooled features after {column.stage} (frozen backbone, probes trained "
            f"together per batch, the run's probe recipe and schedule; last epoch)")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so the run ids of tables without a stage column stay put
        ev["stage_probe"] = sorted({_stage(c, substitute) for c in columns}, key=STAGES.index)


def run(ctx) -> dict[str, float]:
    """Probes trained together on the fly (semcl.evals.stage_probe): each batch through the frozen backbone
    under the probe recipe (with probe.augment) or the test view; a small in-memory set without augmentation
    reads the same view from a feature cache (the same arithmetic), one whose cache would pass
    CACHE_LIMIT_BYTES streams too."""
    import torch

    from semcl.evals.stage_probe import (
        CachedFeatures,
        StreamingFeatures,
        cache_fits,
        stage_feature_table,
        train_stage_probes,
    )

    stages = list(ctx.cfg.eval.stage_probe)
    dev = ctx.device

    def stage_fn(x):
        return ctx.method.stage_features(x.to(dev))

    p = ctx.cfg.probe
    probe = StreamingFeatures(stage_fn, ctx.test.images, ctx.test_transform, stages)
    dims = {s: int(f.shape[1]) for s, f in probe.batch(torch.arange(1), torch.Generator()).items()}
    n = ctx.train.images.shape[0] + ctx.test.images.shape[0]
    if not p.augment and isinstance(ctx.train.images, torch.Tensor) and cache_fits(dims, n):
        train = CachedFeatures(stage_feature_table(stage_fn, ctx.train.images, ctx.test_transform, stages))
        test = CachedFeatures(stage_feature_table(stage_fn, ctx.test.images, ctx.test_transform, stages))
    else:
        # file-backed sets: the random crops come from the whole images, not the evaluation's centre crop
        views = getattr(ctx.train, "train_images", None) if p.augment else None
        transform = ctx.transform(p.recipe or "crop_flip") if p.augment else ctx.test_transform
        train = StreamingFeatures(stage_fn, views if views is not None else ctx.train.images, transform, stages)
        test = probe
    with torch.enable_grad():
        top1 = train_stage_probes(
            train, ctx.train.labels, test, ctx.test.labels, dims=dims, num_classes=ctx.train.num_classes,
            epochs=p.epochs, lr=p.lr, batch_size=p.batch_size, momentum=p.momentum, weight_decay=p.weight_decay,
            milestones=tuple(p.milestones), gamma=p.gamma, seed=ctx.seed, init=p.init or "uniform", device=dev,
            checkpoint=ctx.checkpoint("stage_probe"))
    out = {f"stage_probe_top1_{s}": v for s, v in top1.items()}
    log.info("stage probes: %s", {k: round(v, 2) for k, v in out.items()})
    return out


EVALUATION = Evaluation("stage_probe", ColumnFields, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.stage_probe), run=run,
                        settings=Settings)
