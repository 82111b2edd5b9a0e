"""Per-stage linear probes (HSA Fig. 3): a column reads the last-epoch test top-1 of a linear probe on
the pooled features after one backbone stage (`method.stage_features`, pooling per
semcl.evals.stage_pooling), trained on cached features of the deterministic view with the run's
`probe` settings (lr, epochs, batch, momentum, weight decay, milestones, gamma)."""

from __future__ import annotations

import logging
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

log = logging.getLogger("semcl.evaluate")
STAGES = ("stem", "layer1", "layer2", "layer3", "layer4")


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
    return (f"linear probe top-1 on the pooled features after {column.stage} (frozen backbone, cached "
            f"deterministic-view features, the run's probe schedule; last epoch)")


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:  # absent otherwise, so the run ids of tables without a stage column stay put
        ev["stage_probe"] = sorted({_stage(c, substitute) for c in columns}, key=STAGES.index)


def run(ctx) -> dict[str, float]:
    import torch

    from semcl.evals.stage_probe import probe_on_features, stage_feature_table

    stages = list(ctx.cfg.eval.stage_probe)
    dev = ctx.device

    def stage_fn(x):
        return ctx.method.stage_features(x.to(dev))

    train = stage_feature_table(stage_fn, ctx.train.images, ctx.test_transform, stages)
    test = stage_feature_table(stage_fn, ctx.test.images, ctx.test_transform, stages)
    p = ctx.cfg.probe
    out = {}
    with torch.enable_grad():
        for s in stages:
            out[f"stage_probe_top1_{s}"] = probe_on_features(
                train[s], ctx.train.labels, test[s], ctx.test.labels, num_classes=ctx.train.num_classes,
                epochs=p.epochs, lr=p.lr, batch_size=p.batch_size, momentum=p.momentum,
                weight_decay=p.weight_decay, milestones=tuple(p.milestones), gamma=p.gamma, seed=ctx.seed)
    log.info("stage probes: %s", {k: round(v, 2) for k, v in out.items()})
    return out


EVALUATION = Evaluation("stage_probe", frozenset({"stage"}), validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.stage_probe), run=run)
