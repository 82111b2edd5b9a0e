"""Evaluation protocols: one module each, registered by one line in EVALUATIONS. torch-free to import.

The registry validates a table's columns through this table (`validate_column`), builds each run's
`eval` config section from it (`eval_section`), and the engine runs every enabled evaluation
through it (semcl.engine.evaluate). The column type and the `eval` section's dataclass are assembled
from what the registered evaluations declare (`column_type()`, `eval_config_type()`; semcl.evals.protocols.assemble),
so an evaluation's fields and settings live in its module. See CONTRIBUTING.md, "Add an evaluation".
"""

from __future__ import annotations

from typing import Any

from semcl.errors import ConfigError
from semcl.evals.protocols import (
    accuracy,
    alignment,
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
    spec,
    stage_probe,
    video_accuracy,
    video_retrieval,
)
from semcl.evals.protocols.assemble import Assembled, assemble
from semcl.evals.protocols.spec import COMMON_FIELDS, Evaluation, column_error
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
        alignment.EVALUATION,
    )
}

_assembled: tuple[tuple[Evaluation, ...], Assembled] | None = None


def assembled() -> Assembled:
    """The column type, `eval` section and choices of the evaluations registered now; rebuilt when
    EVALUATIONS changes (a test registers a toy one), else the same classes every call."""
    global _assembled
    current = tuple(EVALUATIONS.values())
    if _assembled is None or len(_assembled[0]) != len(current) or any(
            a is not b for a, b in zip(_assembled[0], current, strict=True)):
        _assembled = (current, assemble(current))
    return _assembled[1]


def column_type() -> type:
    """The registry's column dataclass: spec.Column's common fields plus every evaluation's own."""
    return assembled().column


def eval_config_type() -> type:
    """The run config's `eval` section dataclass: every evaluation's settings."""
    return assembled().eval_config


def eval_choices() -> dict[str, frozenset[str]]:
    """Allowed strings of the `eval` settings, by field name (semcl.run_config checks them)."""
    return dict(assembled().choices)


def __getattr__(name: str) -> type:
    # `from semcl.evals.protocols import Column` (and pickle, by the classes' qualified names) gets the
    # types assembled from the evaluations registered now
    if name == "Column":
        return column_type()
    if name == "EvalConfig":
        return eval_config_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


assembled()  # a clash between two evaluations' declarations is an error at import


def validate_column(raw: Any, where: str, index: int | None = None) -> spec.Column:
    """A registry column (a parsed-YAML mapping) -> Column; ConfigError naming `where` and the key."""
    at = "columns" if index is None else f"columns[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: '{at}' must be a mapping {{key, label, eval, ...}}")
    column = build(column_type(), raw, at, where)
    if column.eval not in EVALUATIONS:
        raise column_error(column, where, f"key 'eval' = {column.eval!r} is not one of {sorted(EVALUATIONS)}")
    evaluation = EVALUATIONS[column.eval]
    foreign = sorted(set(raw) - COMMON_FIELDS - evaluation.fields)
    if foreign:
        takes = ", ".join(sorted(evaluation.fields)) or "no other key"
        raise column_error(column, where, f"key {foreign[0]!r} does not apply to eval {column.eval!r} (it takes: {takes})")
    evaluation.validate(column, where)
    return column


def eval_section(columns: list[spec.Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    """Let every evaluation set its keys of a run's `eval` section from the columns measured in
    this profile (a column whose metric key is None is not measured)."""
    measured = [c for c in columns if metric_key(c, substitute) is not None]
    for name, evaluation in EVALUATIONS.items():
        evaluation.eval_config([c for c in measured if c.eval == name], substitute, ev)


__all__ = ["EVALUATIONS", "Column", "EvalConfig", "Evaluation", "column_error", "column_type", "eval_choices",
           "eval_config_type", "eval_section", "is_measured", "validate_column", "value_bounds"]

# the range a column's number can take, by evaluation: the percentages (top-1, AP, AUROC, mIoU, recall) lie in
# [0, 100]; a gain is a difference of two percentages; a latency is positive; mCE (unnormalised) may pass 100.
# `reported` columns hold whatever the paper printed, so only finiteness is known. Used to refuse a paper value
# a user types by mistake (176.5 as a top-1 %) before it reaches a table (semcl.report.user_numbers).
PERCENT = (0.0, 100.0)
VALUE_BOUNDS: dict[str, tuple[float, float] | None] = {
    "accuracy": PERCENT, "linear_probe": PERCENT, "retrieval": PERCENT, "ood": PERCENT, "segmentation": PERCENT,
    "knn": PERCENT, "stage_probe": PERCENT, "video_accuracy": PERCENT, "video_retrieval": PERCENT,
    "detection": PERCENT, "gain": (-100.0, 100.0), "latency": (0.0, float("inf")), "reported": None,
    "features": None, "robustness": PERCENT, "alignment": None,
}


def metric_key(column: spec.Column, substitute: dict[str, str | None]) -> str | None:
    """Key of the column's number in a run's metrics.json (None: not measured in this profile)."""
    return EVALUATIONS[column.eval].metric_key(column, substitute)


def is_measured(column: spec.Column, columns: list[spec.Column], substitute: dict[str, str | None]) -> bool:
    """Whether the suite gives the column a number in this profile: a run measures it, or (a gain) the
    table computes it from columns that runs measure."""
    if column.eval == gain.EVALUATION.name:
        keys = {c.key: c for c in columns}
        return all(metric_key(keys[k], substitute) is not None for k in column.of or [])
    return metric_key(column, substitute) is not None


def describe(column: spec.Column) -> str:
    """One sentence on how the column is measured (`semcl show`, table captions)."""
    return EVALUATIONS[column.eval].describe(column)


def value_bounds(column: spec.Column) -> tuple[float, float] | None:
    """The closed range a number of this column can take (None: any finite number)."""
    if column.eval == "robustness" and getattr(column, "score", None) == "mce":
        return (0.0, float("inf"))
    if column.eval == alignment.EVALUATION.name:
        return alignment.BOUNDS[column.quantity]
    return VALUE_BOUNDS.get(column.eval)
