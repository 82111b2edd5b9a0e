"""Evaluation metrics: linear probe, retrieval, OOD detection, accuracy, features, latency.

``EVALS`` maps the evaluation names used in run configs to their entry points.
"""

from semcl.evals.accuracy import shot_group_accuracy, topk_accuracy
from semcl.evals.features import extract_features
from semcl.evals.latency import measure_latency
from semcl.evals.linear_probe import ProbeResult, linear_probe, lr_at_epoch
from semcl.evals.ood import auroc, class_gaussian_auroc, class_gaussian_scores
from semcl.evals.retrieval import retrieval_scores

EVALS = {
    "linear_probe": linear_probe,
    "retrieval": retrieval_scores,
    "ood": class_gaussian_auroc,
}

__all__ = [
    "EVALS",
    "ProbeResult",
    "auroc",
    "class_gaussian_auroc",
    "class_gaussian_scores",
    "extract_features",
    "linear_probe",
    "lr_at_epoch",
    "measure_latency",
    "retrieval_scores",
    "shot_group_accuracy",
    "topk_accuracy",
]
