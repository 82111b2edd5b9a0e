"""Evaluation protocols: one module each, registered by one line in EVALUATIONS. torch-free to import.

The registry validates a table's columns through this table (`validate_column`), builds each run's
`eval` config section from it (`eval_section`), and the engine runs every enabled evaluation
through it (semcl.engine.evaluate). See CONTRIBUTING.md, "Add an evaluation".
"""

from __future__ import annotations

from typing import Any

from semcl.errors import ConfigError
from semcl.evals.protocols import (
    accuracy,
    detection,
    features,
    gain,
    knn,
    latency,
    linear_probe,
    ood,
    reported,
    retrieval,
    robustness,
    segmentation,
    stage_probe,
    video_accuracy,
    video_retrieval,
)
from semcl.evals.protocols.spec import COMMON_FIELDS, Column, Evaluation, column_error
from semcl.schema import build

# run order: the classifier pass first (its logits feed ensembles), then the feature-based protocols
EVALUATIONS: dict[str, Evaluation] = {
    e.name: e for e in (
        accuracy.EVALUATION,
        latency.EVALUATION,
        linear_probe.EVALUATION,
        retrieval.EVALUATION,
        ood.EVALUATION,
        robustness.EVALUATION,
        segmentation.EVALUATION,
        knn.EVALUATION,
        stage_probe.EVALUATION,
        video_accuracy.EVALUATION,
        video_retrieval.EVALUATION,
        reported.EVALUATION,
        detection.EVALUATION,
        gain.EVALUATION,
        features.EVALUATION,
    )
}


def validate_column(raw: Any, where: str, index: int | None = None) -> Column:
    """A registry column (a parsed-YAML mapping) -> Column; ConfigError naming `where` and the key."""
    at = "columns" if index is None else f"columns[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: '{at}' must be a mapping {{key, label, eval, ...}}")
    column = build(Column, raw, at, where)
    if column.eval not in EVALUATIONS:
        raise column_error(column, where, f"key 'eval' = {column.eval!r} is not one of {sorted(EVALUATIONS)}")
    spec = EVALUATIONS[column.eval]
    foreign = sorted(set(raw) - COMMON_FIELDS - spec.fields)
    if foreign:
        takes = ", ".join(sorted(spec.fields)) or "no other key"
        raise column_error(column, where, f"key {foreign[0]!r} does not apply to eval {column.eval!r} (it takes: {takes})")
    spec.validate(column, where)
    return column


def eval_section(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    """Let every evaluation set its keys of a run's `eval` section from the columns measured in
    this profile (a column whose metric key is None is not measured)."""
    measured = [c for c in columns if metric_key(c, substitute) is not None]
    for name, spec in EVALUATIONS.items():
        spec.eval_config([c for c in measured if c.eval == name], substitute, ev)


__all__ = ["EVALUATIONS", "Column", "Evaluation", "column_error", "eval_section", "is_measured", "validate_column"]


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    """Key of the column's number in a run's metrics.json (None: not measured in this profile)."""
    return EVALUATIONS[column.eval].metric_key(column, substitute)


def is_measured(column: Column, columns: list[Column], substitute: dict[str, str | None]) -> bool:
    """Whether the suite gives the column a number in this profile: a run measures it, or (a gain) the
    table computes it from columns that runs measure."""
    if column.eval == gain.EVALUATION.name:
        keys = {c.key: c for c in columns}
        return all(metric_key(keys[k], substitute) is not None for k in column.of or [])
    return metric_key(column, substitute) is not None


def describe(column: Column) -> str:
    """One sentence on how the column is measured (`semcl show`, table captions)."""
    return EVALUATIONS[column.eval].describe(column)
