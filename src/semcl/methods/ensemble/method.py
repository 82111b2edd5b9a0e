"""Logit-sum ensembles: no training; the members' saved test logits are summed (official evaluation,
docs/papers/paco.md §f) and scored like one model."""

from __future__ import annotations

import torch

from semcl.config import RunConfig
from semcl.errors import ResultsError
from semcl.evals.protocols.accuracy import logit_metrics
from semcl.methods.base import Dependency, Method


class LogitEnsemble(Method):
    """Top-1 / shot groups of the summed member logits; latency = the members' latencies added (they
    run one after another), when every member measured it (ensemble_metrics, the spec's `computes`)."""


def ensemble_metrics(cfg: RunConfig, deps: list[Dependency]) -> dict[str, float]:
    """The ensemble's metrics from its members' saved test logits (no data, no training)."""
    members = [d.load_logits() for d in deps]
    first = members[0]
    for dep, m in zip(deps[1:], members[1:], strict=True):
        if m["logits"].shape != first["logits"].shape or not torch.equal(m["labels"], first["labels"]):
            raise ResultsError(f"{dep.run_dir}: test set differs from the first member's ({deps[0].run_id}); "
                               f"ensemble members must share the test split")
    total = torch.stack([m["logits"].float() for m in members]).sum(dim=0)  # fp16 on disk, summed in fp32
    metrics = logit_metrics(total, first["labels"], first["train_counts"], cfg.eval.accuracy or [])
    latencies = [d.load_metrics().get("latency_ms") for d in deps]
    if cfg.eval.latency and all(v is not None for v in latencies):
        metrics["latency_ms"] = float(sum(latencies))
    metrics["members"] = len(members)
    return metrics
