"""Evaluate a trained method with the protocols its table's columns ask for.

Every evaluation registered in semcl.evals.protocols.EVALUATIONS whose `enabled(cfg, method)` holds
runs once, in the table's order, on one shared EvalContext (the features of the training and test
images are computed once). All numbers are percentages (latency: milliseconds). Features: the
method's `features(x)` (the backbone's pooled output, before any head), images passed through the
deterministic test transform with the in-distribution statistics.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet
from semcl.evals.protocols import EVALUATIONS
from semcl.evals.protocols.context import EvalContext, outputs
from semcl.methods.base import Method
from semcl.runtime.checkpoint import save_atomic

log = logging.getLogger("semcl.evaluate")


@torch.no_grad()
def select_on_validation(method: Method, cfg: RunConfig, train: ImageSet, val: ImageSet) -> dict[str, float]:
    """Let a method pick its free parameter on the val split (Decouple tau-norm's tau), on its evaluation
    features of the val images under the test transform; returns what it chose."""
    method.eval()
    ctx = EvalContext(method, cfg, train, val, data_root=None, seed=0)
    feats = outputs(ctx.encode, val.images, ctx.test_transform)
    chosen = method.select_on_validation(feats, val.labels)
    log.info("chosen on val (%d images): %s", len(val.labels), chosen)
    return chosen


@torch.no_grad()
def evaluate(method: Method, cfg: RunConfig, train: ImageSet, test: ImageSet, data_root: Path | None, seed: int,
             logits_path: Path | None = None, checkpoint_dir: Path | None = None) -> dict[str, float]:
    """{metric key: value} of every enabled evaluation (see module docstring); long evaluations (the
    augmented linear probe) keep their state in `checkpoint_dir` after each epoch, so a requeued
    evaluation resumes there."""
    method.eval()
    ctx = EvalContext(method, cfg, train, test, data_root, seed, logits_path, save=save_atomic,
                      checkpoint_dir=checkpoint_dir)
    metrics: dict[str, float] = {}
    for spec in EVALUATIONS.values():
        if spec.run is not None and spec.enabled(cfg, method):
            metrics.update(spec.run(ctx))
    return metrics
