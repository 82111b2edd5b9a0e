"""A number the paper gives that the suite does not measure (mIoU, a gain): the table shows the paper's value only."""

from __future__ import annotations

from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation


def validate(column: Column, where: str) -> None:
    """Nothing to check: the column has no fields of its own."""


def metric_key(column: Column, substitute: dict[str, str | None]) -> None:
    return None


def describe(column: Column) -> str:
    return "paper value only (not measured by the suite)"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    """Never measured, so it asks nothing of the run."""


EVALUATION = Evaluation("reported", None, validate, metric_key, describe, eval_config)
