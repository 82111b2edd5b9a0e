"""The registry's column type and the run config's `eval` section, assembled from the evaluations. torch-free.

Each evaluation declares its own column fields (`Evaluation.column`) and run settings
(`Evaluation.settings`) as small dataclasses, and the allowed strings of its settings
(`Evaluation.choices`). The one column type and the one `eval` section are their unions
(dataclasses.make_dataclass), the way the method section is the registered method's schema, so adding
an evaluation touches its module and its registry line only. Two evaluations may share a field (video
accuracy and video retrieval both read `video_clips`) only when they declare it alike: same type,
default and range rule; otherwise assembling refuses with one line naming both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import COMMON_FIELDS, Column, Evaluation
from semcl.schema import type_hints

# where the assembled classes say they live: `semcl.evals.protocols.Column` / `.EvalConfig` resolve to them
HOME = "semcl.evals.protocols"


class DeclarationError(TypeError):
    """Two evaluations declare one field differently, or a declaration is malformed (a bug, found at import)."""


@dataclass(frozen=True)
class Assembled:
    column: type  # a frozen subclass of spec.Column
    eval_config: type  # the run config's `eval` section
    choices: Mapping[str, frozenset[str]]  # eval setting -> allowed strings


def _signature(tp: Any, f: dataclasses.Field) -> tuple:
    """What makes two declarations of a field alike (a default factory by the value it makes)."""
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    return tp, default, dict(f.metadata)


def _union(evaluations: list[Evaluation], attr: str, reserved: frozenset[str]) -> list[tuple[str, Any, Any]]:
    """make_dataclass field specs for the union of every evaluation's `attr` dataclass, in registry order."""
    owner: dict[str, tuple[str, tuple]] = {}
    specs = []
    for e in evaluations:
        cls = getattr(e, attr)
        if cls is None:
            continue
        if not dataclasses.is_dataclass(cls):
            raise DeclarationError(f"evaluation {e.name!r}: {attr} must be a dataclass, got {cls!r}")
        hints = type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DeclarationError(f"evaluation {e.name!r}: {attr} field {f.name!r} needs a default")
            if f.name in reserved:
                raise DeclarationError(f"evaluation {e.name!r}: {attr} field {f.name!r} is one every column has")
            sig = _signature(hints[f.name], f)
            if f.name in owner:
                first, seen = owner[f.name]
                if seen != sig:
                    raise DeclarationError(f"evaluations {first!r} and {e.name!r} declare {attr} field {f.name!r} "
                                           f"differently: {seen} vs {sig}")
                continue
            owner[f.name] = (e.name, sig)
            specs.append((f.name, hints[f.name], dataclasses.field(
                default=f.default, default_factory=f.default_factory, metadata=f.metadata)))
    return specs


def _choices(evaluations: list[Evaluation]) -> dict[str, frozenset[str]]:
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for e in evaluations:
        names = {f.name for f in dataclasses.fields(e.settings)} if e.settings else set()
        for name, allowed in e.choices.items():
            if name not in names:
                raise DeclarationError(f"evaluation {e.name!r}: choices name {name!r}, not one of its settings")
            if name in out and out[name][1] != frozenset(allowed):
                raise DeclarationError(f"evaluations {out[name][0]!r} and {e.name!r} allow different values "
                                       f"of eval.{name}")
            out[name] = (e.name, frozenset(allowed))
    return {name: allowed for name, (_, allowed) in out.items()}


def assemble(evaluations: Iterable[Evaluation]) -> Assembled:
    """The column type, the `eval` section and its choices for these evaluations; DeclarationError on a clash."""
    evs = list(evaluations)
    column = dataclasses.make_dataclass("Column", _union(evs, "column", COMMON_FIELDS), bases=(Column,), frozen=True)
    settings = dataclasses.make_dataclass("EvalConfig", _union(evs, "settings", frozenset()))
    for cls in (column, settings):
        cls.__module__ = HOME
    column.__doc__ = Column.__doc__
    settings.__doc__ = "The run's `eval` section: every evaluation's settings (semcl.evals.protocols.assemble)."
    return Assembled(column, settings, _choices(evs))
