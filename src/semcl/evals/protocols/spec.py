"""What an evaluation declares (`Evaluation`) and the registry column it reads (`Column`). torch-free.

A table's column names one evaluation (`eval:`) and the evaluation's own fields; the evaluation
validates the column when the registry loads, names the key of its number in a run's metrics.json,
describes it for tables, says what the run's `eval` config section needs so that the engine runs
it, and runs it on a trained method (its `run` imports torch lazily).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from semcl.errors import ConfigError
from semcl.schema import POSITIVE

if TYPE_CHECKING:
    from semcl.config import RunConfig
    from semcl.evals.protocols.context import EvalContext

# the fields every column has; each evaluation lists the others it accepts
COMMON_FIELDS = frozenset({"key", "label", "eval"})


@dataclass(frozen=True)
class Column:
    """One column of a registry table. Which of the optional fields apply depends on `eval`
    (`Evaluation.fields`); a field another evaluation owns is an error at load time."""

    key: str
    label: str
    eval: str
    epoch: str = "last"  # linear_probe: the probe epoch the number is read at, last | best
    labels: str | None = None  # retrieval label set: fine | coarse
    measure: str | None = None  # retrieval: R@k | AP
    out: str | None = None  # ood: the out-of-distribution set
    classes: str | None = None  # ood: only these classes of `out` (semcl.data.imagenet100.OOD_CLASS_SUBSETS)
    group: str | None = None  # accuracy: overall | many | medium | few
    thresholds: str = "paco"  # accuracy: shot-group convention, paco | oltr
    k: int | None = field(default=None, metadata=POSITIVE)  # knn: neighbours (None = 20)
    testset: str | None = None  # robustness: imagenet_c | imagenet_r | imagenet_sketch
    score: str | None = None  # robustness: top1 | error | mce | mce_alexnet
    inference: str | None = None  # segmentation: single_scale | multi_scale
    stage: str | None = None  # stage_probe: the backbone stage probed (stem, layer1 ... layer4)
    of: list[str] | None = None  # gain: the column key(s) the gain is taken on
    over: dict[str, str] | None = None  # gain: row label -> the row it is compared with
    reduce: str | None = None  # gain: min | max over several `of` columns


def column_error(column: Column, where: str, message: str) -> ConfigError:
    """The one-line error for a bad column: file, column key, what is wrong."""
    return ConfigError(f"{where}: column {column.key!r}: {message}")


@dataclass(frozen=True)
class Evaluation:
    """One evaluation protocol, registered in `semcl.evals.protocols.EVALUATIONS`.

    name:        the columns' `eval:` value
    fields:      optional column fields it accepts (see `Column`); any other set field is an error
    validate:    (column, where) -> None; ConfigError naming `where` and the key for a bad value
    metric_key:  (column, profile substitute) -> key in metrics.json, or None when not measured
    describe:    (column) -> one sentence for `semcl show` and table captions
    eval_config: (its measured columns, possibly none; the profile's substitute; the run's `eval`
                 section as a dict) -> None;
                 sets the keys its engine side reads. Must set nothing new when it has no column,
                 so a table without such a column keeps its run ids.
    enabled:     (run config, method) -> whether `run` is called for this run
    run:         (EvalContext) -> {metric key: value}; None for numbers the suite does not measure
    """

    name: str
    fields: frozenset[str]
    validate: Callable[[Column, str], None]
    metric_key: Callable[[Column, dict[str, str | None]], str | None]
    describe: Callable[[Column], str]
    eval_config: Callable[[list[Column], dict[str, str | None], dict[str, Any]], None]
    enabled: Callable[[RunConfig, Any], bool] = lambda cfg, method: False
    run: Callable[[EvalContext], dict[str, float]] | None = None

