"""Evaluation metrics (linear probe, retrieval, OOD detection, accuracy, kNN, features, latency), one module
each, and the protocols that tie them to registry columns (semcl.evals.protocols). Import a metric from its
module; this package imports nothing, so `semcl.evals.protocols` (which the registry reads) stays torch-free."""
