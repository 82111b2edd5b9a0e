"""Evaluation metrics (linear probe, retrieval, OOD detection, accuracy, kNN, features, latency) and
the protocols that tie them to registry columns (semcl.evals.protocols).

The metric functions import torch, so they load on first use (PEP 562): importing
`semcl.evals.protocols` (the registry does, for `semcl list`) stays torch-free.
``EVALS`` maps the evaluation names used in run configs to their metric functions. The probe
function is `semcl.evals.linear_probe.linear_probe` (`semcl.evals.linear_probe` is its module).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "shot_group_accuracy": "accuracy", "topk_accuracy": "accuracy",
    "extract_features": "features",
    "knn_accuracy": "knn", "knn_predict": "knn",
    "measure_latency": "latency",
    "ProbeResult": "linear_probe", "lr_at_epoch": "linear_probe",
    "auroc": "ood", "class_gaussian_auroc": "ood", "class_gaussian_scores": "ood",
    "retrieval_scores": "retrieval",
}


def __getattr__(name: str) -> Any:
    if name == "EVALS":
        probe = importlib.import_module("semcl.evals.linear_probe").linear_probe
        return {"linear_probe": probe, "retrieval": __getattr__("retrieval_scores"),
                "ood": __getattr__("class_gaussian_auroc")}
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"semcl.evals.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'semcl.evals' has no attribute {name!r}")


__all__ = ["EVALS", *sorted(_EXPORTS)]
