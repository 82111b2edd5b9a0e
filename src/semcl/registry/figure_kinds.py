"""The figure kinds a registry entry's `figure:` may name: kind -> the check of its keys. Torch-free.

Each check takes (the parsed `figure` mapping, the table's column keys, where) and returns the normalised
spec or raises a one-line ConfigError naming the file and key. semcl.report.figures holds the writer of
each kind (FIGURE_WRITERS, the same keys; tests/registry/test_figure_kinds.py keeps the two tables equal).
See CONTRIBUTING.md, "Add a figure kind".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from semcl.errors import ConfigError

FEATURE_FIGURES = ("tsne", "similarity_hist")  # drawn from the test features the rows' runs saved
CURVE_FIGURES = ("pr_curve",)  # drawn from a curve file each run writes (semcl.report.curve_figures)


def _only(spec: dict, allowed: set[str], fw: str) -> None:
    extra = sorted(set(spec) - allowed)
    if extra:
        raise ConfigError(f"{fw}: unknown key '{extra[0]}' (allowed: {', '.join(sorted(allowed))})")


def _args(spec: dict, fw: str) -> dict:
    if not isinstance(spec.get("args", {}), dict):
        raise ConfigError(f"{fw}: key 'args' must be a mapping of keyword arguments")
    return dict(spec.get("args") or {})


def _scatter(spec: dict, keys: list[str], fw: str) -> dict:
    """{kind: scatter, x: <column>, y: <column>[, annotate: <column>]}: one point per row (e.g. GPaCo Fig. 1(a));
    `annotate` writes a third column's mean beside each of our points (RINCE's alignment / uniformity vs OOD AUROC)."""
    _only(spec, {"kind", "x", "y", "annotate"}, fw)
    for axis in ("x", "y", "annotate"):
        if axis not in spec:
            if axis == "annotate":
                continue
            raise ConfigError(f"{fw}: missing key '{axis}'")
        if spec[axis] not in keys:
            raise ConfigError(f"{fw}: key '{axis}' = {spec[axis]!r} is not a column key ({', '.join(keys)})")
    return dict(spec)


def _lines(spec: dict, keys: list[str], fw: str) -> dict:
    """{kind: lines, columns: [<column>, ...], ylabel: ...}: one line per row across the columns (HSA Fig. 3)."""
    _only(spec, {"kind", "columns", "ylabel"}, fw)
    cols = spec.get("columns", keys)
    if not isinstance(cols, list) or not cols or any(c not in keys for c in cols):
        raise ConfigError(f"{fw}: key 'columns' = {cols!r} must list column keys ({', '.join(keys)})")
    return {"kind": "lines", "columns": list(cols), "ylabel": str(spec.get("ylabel", ""))}


def _analytic(spec: dict, keys: list[str], fw: str) -> dict:
    """{kind: analytic, function: <module>.<function> of semcl.analysis, args: {...}}: drawn without runs."""
    _only(spec, {"kind", "function", "args"}, fw)
    if "function" not in spec:
        raise ConfigError(f"{fw}: missing key 'function'")
    function = spec["function"]
    parts = function.split(".") if isinstance(function, str) else []
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"{fw}: key 'function' = {function!r} is not <module>.<function> (a function of semcl.analysis)")
    return {"kind": "analytic", "function": function, "args": _args(spec, fw)}


def _from_run_files(spec: dict, keys: list[str], fw: str) -> dict:
    """{kind: <feature or curve kind>, args: {...}}: drawn from files the rows' runs saved."""
    _only(spec, {"kind", "args"}, fw)
    return {"kind": spec["kind"], "args": _args(spec, fw)}


FIGURE_KINDS: dict[str, Callable[[dict, list[str], str], dict[str, Any]]] = {
    "scatter": _scatter,
    "lines": _lines,
    "analytic": _analytic,
    **dict.fromkeys(FEATURE_FIGURES + CURVE_FIGURES, _from_run_files),
}


def check_figure(spec: Any, keys: list[str], where: str) -> dict[str, Any] | None:
    """A registry entry's `figure` (None: the table has none), checked by its kind's entry of FIGURE_KINDS."""
    if spec is None:
        return None
    fw = f"{where}: figure"
    if not isinstance(spec, dict):
        raise ConfigError(f"{fw}: must be a mapping with a 'kind' ({', '.join(map(repr, FIGURE_KINDS))})")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in FIGURE_KINDS:
        raise ConfigError(f"{fw}: key 'kind' must be one of {', '.join(map(repr, FIGURE_KINDS))}")
    return FIGURE_KINDS[kind](spec, keys, fw)
