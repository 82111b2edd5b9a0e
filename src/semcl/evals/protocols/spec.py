"""What an evaluation declares (`Evaluation`) and the registry column it reads (`Column`). torch-free.

A table's column names one evaluation (`eval:`) and the evaluation's own fields; the evaluation
validates the column when the registry loads, names the key of its number in a run's metrics.json,
describes it for tables, says what the run's `eval` config section needs so that the engine runs
it, and runs it on a trained method (its `run` imports torch lazily).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from semcl.errors import ConfigError

if TYPE_CHECKING:
    from semcl.config import RunConfig
    from semcl.evals.protocols.context import EvalContext

# the fields every column has; each evaluation lists the others it accepts
COMMON_FIELDS = frozenset({"key", "label", "eval"})


@dataclass(frozen=True)
class Column:
    """One column of a registry table: the fields every column has. The registry's column type
    (`semcl.evals.protocols.column_type()`) adds every evaluation's own fields (`Evaluation.column`);
    which of them a column may set depends on `eval`, and a field another evaluation owns is an error
    at load time."""

    key: str
    label: str
    eval: str


def column_error(column: Column, where: str, message: str) -> ConfigError:
    """The one-line error for a bad column: file, column key, what is wrong."""
    return ConfigError(f"{where}: column {column.key!r}: {message}")


@dataclass(frozen=True)
class Evaluation:
    """One evaluation protocol, registered in `semcl.evals.protocols.EVALUATIONS`.

    name:        the columns' `eval:` value
    column:      a dataclass of the optional column fields it accepts (types, defaults, range rules as
                 `semcl.schema` metadata), or None; any other set field is an error. Two evaluations may
                 share a field only when they declare it alike (semcl.evals.protocols.assemble).
    validate:    (column, where) -> None; ConfigError naming `where` and the key for a bad value
    metric_key:  (column, profile substitute) -> key in metrics.json, or None when not measured
    describe:    (column) -> one sentence for `semcl show` and table captions
    eval_config: (its measured columns, possibly none; the profile's substitute; the run's `eval`
                 section as a dict) -> None;
                 sets the keys its engine side reads. Must set nothing new when it has no column,
                 so a table without such a column keeps its run ids.
    settings:    a dataclass of the run config's `eval` keys its `run` reads, or None; default None
                 ("off": hashable_config drops None, so adding one keeps every run id)
    choices:     allowed string values of `settings` fields, by field name (`eval.<name>` in errors)
    enabled:     (run config, method) -> whether `run` is called for this run
    run:         (EvalContext) -> {metric key: value}; None for numbers the suite does not measure
    check_table: (column, the table's columns by key, its row labels, where) -> None; references to other columns
                 and rows, checked once the whole table is read; None when it has none
    derive:      (column, the table's columns by key, {(row, column key, seed): value}, seeds) -> [(row, seed,
                 value)]: a column the table computes from its other cells, per seed; None for measured ones
    is_difference: its values are already a difference of two rows (a claim on it names no second row)
    quick:       (the run's `eval` section) -> {settings field: value}: what `semcl check` runs it with (the same
                 code on fewer images, clips or repeats); None: as configured
    """

    name: str
    column: type | None
    validate: Callable[[Column, str], None]
    metric_key: Callable[[Column, dict[str, str | None]], str | None]
    describe: Callable[[Column], str]
    eval_config: Callable[[list[Column], dict[str, str | None], dict[str, Any]], None]
    enabled: Callable[[RunConfig, Any], bool] = lambda cfg, method: False
    run: Callable[[EvalContext], dict[str, float]] | None = None
    settings: type | None = None
    choices: Mapping[str, frozenset[str]] = field(default_factory=dict)
    check_table: Callable[[Column, dict[str, Column], set[str], str], None] | None = None
    derive: Callable[[Column, dict[str, Column], dict[tuple[str, str, int], float], list[int]],
                     list[tuple[str, int, float]]] | None = None
    is_difference: bool = False
    quick: Callable[[Any], dict[str, Any]] | None = None
    # the test images per class its quick run needs (semcl check's stand-in test split has 1): alignment needs pairs
    quick_test_per_class: int = 1

    @property
    def fields(self) -> frozenset[str]:
        """The names of the column fields it accepts besides COMMON_FIELDS."""
        return frozenset(f.name for f in dataclasses.fields(self.column)) if self.column else frozenset()

