"""A run config built from a tree: the sections from semcl.config, the method section from the method registry.

One layer above both (and above the view recipes of semcl.data), so that the schema layer, semcl.config,
imports nothing from methods/ or data/ (tests/house/test_import_graph.py keeps the layers).
"""

from __future__ import annotations

from typing import Any

from semcl.config import CHOICES, SECTIONS, RunConfig
from semcl.data.views.recipes import parse_augment
from semcl.errors import ConfigError
from semcl.evals.protocols import eval_choices, eval_config_type
from semcl.methods.registry import DEFAULT_METHOD, METHODS, PLANNED_METHODS
from semcl.schema import build


def _section(cls: type, values: dict, prefix: str, where: str, choices: dict | None = None) -> Any:
    """A config section; `choices` (a method spec's or the evaluations', by field name) replaces the CHOICES table."""
    allowed = CHOICES if choices is None else {f"{prefix}.{k}": v for k, v in choices.items()}
    return build(cls, values, prefix, where, allowed)


def section_types() -> dict[str, type]:
    """Every section's dataclass but the method's: semcl.config's and the `eval` section the evaluations assemble."""
    return {**SECTIONS, "eval": eval_config_type()}


def build_config(tree: dict, *, where: str) -> RunConfig:
    """Validate a nested dict into a RunConfig; `where` names the source in errors."""
    method = dict(tree.get("method", {}))
    name = method.get("name", DEFAULT_METHOD)
    if name not in METHODS:
        extra = " (planned, not implemented yet)" if name in PLANNED_METHODS else ""
        raise ConfigError(f"{where}: unknown method 'method.name' = {name!r}{extra}; known: {sorted(METHODS)}")
    spec = METHODS[name]
    cfg = RunConfig(method=_section(spec.schema, method, "method", where, choices=spec.choices))
    for section, cls in SECTIONS.items():
        setattr(cfg, section, _section(cls, tree.get(section, {}), section, where))
    cfg.eval = _section(eval_config_type(), tree.get("eval", {}), "eval", where, choices=eval_choices())
    if spec.head_layers is not None:  # the record says what the method builds
        asked = tree.get("model", {}).get("head_layers")
        if asked is not None and asked != spec.head_layers:
            raise ConfigError(f"{where}: 'model.head_layers' = {asked!r}, but method {name!r} builds a "
                              f"{spec.head_layers}-layer projector whatever it says (leave the key out)")
        cfg.model.head_layers = spec.head_layers
    try:
        parse_augment(cfg.data.augment)
    except ValueError as err:
        raise ConfigError(f"{where}: 'data.augment' = {cfg.data.augment!r}: {err}") from None
    if cfg.probe.recipe is not None:
        try:
            if len(parse_augment(cfg.probe.recipe)) != 1:
                raise ValueError("one recipe, not a per-view pair")
        except ValueError as err:
            raise ConfigError(f"{where}: 'probe.recipe' = {cfg.probe.recipe!r}: {err}") from None
    if cfg.probe.init not in (None, "uniform", "normal"):
        raise ConfigError(f"{where}: 'probe.init' = {cfg.probe.init!r} is not one of ['normal', 'uniform']")
    return cfg
