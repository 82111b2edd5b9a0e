"""Detection transfer (HSA VOC / COCO tables): a column reads the number a `detectron2_transfer` run wrote
under the column's key -- the mean of its trials' final evaluations (semcl.methods.transfer). Nothing runs at
evaluation time; rows of other methods (the pre-training runs) have no such number and show none."""

from __future__ import annotations

from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error
from semcl.methods.transfer import METRIC_KEYS

KEYS = sorted({k for keys in METRIC_KEYS.values() for k in keys.values()})


def validate(column: Column, where: str) -> None:
    if column.key not in KEYS:
        raise column_error(column, where, f"a detection column's key must be one of {KEYS} (the transfer metrics)")


def metric_key(column: Column, substitute: dict[str, str | None]) -> str:
    return column.key


def describe(column: Column) -> str:
    return f"detectron2 transfer {column.key}: mean over the run's fine-tuning trials (final evaluation each)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    """The transfer run computes its numbers itself: nothing to ask of the run's evaluation."""


EVALUATION = Evaluation("detection", None, validate, metric_key, describe, eval_config)
