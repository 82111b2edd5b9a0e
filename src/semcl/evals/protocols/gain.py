"""A gain the paper reports ("+0.4 over MAE", "1.2-3.5 points on C/R/S"), computed from the suite's runs.

    {key: gain_vs_mae, label: "Gain over MAE (pp)", eval: gain, of: [top1],
     over: {"GPaCo ViT-B": "CE (MAE fine-tune) ViT-B"}}

For each row named in `over`, per seed s: for every column c in `of`, the improvement of the row over its
base row, oriented so that better is positive (row − base for accuracies, base − row for errors and mCE:
`lower_is_better`); one column gives that number, several are reduced by `reduce` (min: the low end of a
range, max: the high end). Only seeds where both rows have every column count (as derived rows). Rows not
in `over` have no value. Runs measure nothing for it: the table computes it (semcl.report.tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation, column_error

REDUCERS = ("min", "max")


@dataclass
class ColumnFields:
    of: list[str] | None = None  # the column key(s) the gain is taken on
    over: dict[str, str] | None = None  # row label -> the row it is compared with
    reduce: str | None = None  # min | max over several `of` columns (REDUCERS)


def lower_is_better(column: Column) -> bool:
    """Columns where a smaller number is better: robustness errors and mCE."""
    return column.eval == "robustness" and column.score in ("error", "mce", "mce_alexnet")


def validate(column: Column, where: str) -> None:
    if not column.of:
        raise column_error(column, where, "key 'of' must list the column key(s) the gain is taken on")
    if not column.over:
        raise column_error(column, where, "key 'over' must map row labels to the row each is compared with")
    if len(column.of) > 1 and column.reduce not in REDUCERS:
        raise column_error(column, where, f"key 'reduce' must be one of {REDUCERS} when 'of' lists several columns")
    if len(column.of) == 1 and column.reduce is not None:
        raise column_error(column, where, "key 'reduce' applies only when 'of' lists several columns")


def check_table(column: Column, keys: dict[str, Column], labels: set[str], where: str) -> None:
    """Table-level references: `of` names measured columns of the table, `over` names its rows."""
    for k in column.of or []:
        if k not in keys or keys[k].eval in ("gain", "reported"):
            raise column_error(column, where, f"key 'of' names {k!r}, which is no measured column of this table")
    for row, base in (column.over or {}).items():
        for label in (row, base):
            if label not in labels:
                raise column_error(column, where, f"key 'over' names no row {label!r}")


def seed_values(column: Column, keys: dict[str, Column], value: dict[tuple[str, str, int], float],
                seeds: list[int]) -> list[tuple[str, int, float]]:
    """(row, seed, gain) for every row of `over` and seed with complete values (module docstring)."""
    out = []
    for row, base in (column.over or {}).items():
        for seed in seeds:
            gains = []
            for k in column.of or []:
                a, b = value.get((row, k, seed)), value.get((base, k, seed))
                if a is None or b is None:
                    break
                gains.append(b - a if lower_is_better(keys[k]) else a - b)
            else:
                out.append((row, seed, gains[0] if len(gains) == 1 else (min if column.reduce == "min" else max)(gains)))
    return out


def metric_key(column: Column, substitute: dict[str, str | None]) -> None:
    return None  # not in any run's metrics: the table computes it


def describe(column: Column) -> str:
    over = "; ".join(f"{r} over {b}" for r, b in (column.over or {}).items())
    what = ", ".join(column.of or [])
    red = f", the {column.reduce} over them" if column.reduce else ""
    return f"gain on {what}{red} (better = positive), per seed: {over}"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    """Computed from other columns, so it asks nothing of the run."""


EVALUATION = Evaluation("gain", ColumnFields, validate, metric_key, describe, eval_config,
                        check_table=check_table, derive=seed_values, is_difference=True)
