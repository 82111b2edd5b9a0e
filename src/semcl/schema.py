"""Strict dataclass schemas: the one checker behind the run config and the registry entry.

`build(cls, values, prefix, where)` turns a parsed-YAML mapping into the dataclass `cls`:
unknown keys, missing required keys, wrong types (a string where a list belongs, a bool where a
number belongs, a non-finite float) and values outside a field's range rule raise one
ConfigError naming `where` (the file) and the dotted key.

Range rules live on the field, as metadata (`field(default=..., metadata=POSITIVE)`), so a
schema states its own limits instead of a list of names elsewhere:
    POSITIVE     every number > 0 (counts: epochs, batch sizes, bank sizes, cpus)
    NON_NEGATIVE every number >= 0 (seeds, warm-up epochs, weight decay)
    UNIQUE       a list without repeats (seeds)
    NON_EMPTY    a list with at least one item
    SEED         0 <= seed < 2**32 (numpy seeds its generators with 32 bits)
    at_most(n)   every number <= n: sizes (images per class, batch sizes, epochs), so a typo of a
                 few zeros is one line at load, not an allocation that dies after submission
Rules combine: `metadata={**POSITIVE, **at_most(10_000)}`. For a list they apply to every item.
Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from semcl.errors import ConfigError

POSITIVE: Mapping[str, Any] = types.MappingProxyType({"min": 0, "min_exclusive": True})
NON_NEGATIVE: Mapping[str, Any] = types.MappingProxyType({"min": 0, "min_exclusive": False})
UNIQUE: Mapping[str, Any] = types.MappingProxyType({"unique": True})
NON_EMPTY: Mapping[str, Any] = types.MappingProxyType({"non_empty": True})
SEED: Mapping[str, Any] = types.MappingProxyType({"min": 0, "min_exclusive": False, "max": 2**32 - 1,
                                                  "max_why": "numpy seeds are 32-bit"})


def at_most(limit: int | float, why: str = "") -> Mapping[str, Any]:
    """The rule `every number <= limit` (module docstring); `why` is said in the error."""
    return types.MappingProxyType({"max": limit, "max_why": why})

MISSING = dataclasses.MISSING


def check_type(value: Any, tp: Any, key: str, where: str) -> Any:
    """`value` as type `tp` (int, float, str, bool, list[X], dict[str, X], X | None, Any or a
    dataclass, built strictly); ConfigError naming `where` and `key` otherwise."""
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return check_type(value, arg, key, where)
            except ConfigError as err:
                errors.append(err)
        if len(errors) == 1:  # `X | None`: X's own message is the precise one
            raise errors[0]
        raise ConfigError(f"{where}: '{key}' must be {_name(tp)}, got {value!r}")
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: '{key}' must be a list, got {value!r}")
        return [check_type(v, item, f"{key}[{i}]" if _is_dataclass(item) else key, where)
                for i, v in enumerate(value)]
    if origin is dict:
        kt, vt = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{key}' must be a mapping, got {value!r}")
        return {check_type(k, kt, key, where): check_type(v, vt, f"{key}.{k}", where) for k, v in value.items()}
    if _is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{key}' must be a mapping, got {value!r}")
        return build(tp, value, key, where)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: '{key}' must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{where}: '{key}' must be a finite number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: '{key}' must be an integer, got {value!r}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise ConfigError(f"{where}: '{key}' must be {tp.__name__}, got {value!r}")
        return value
    raise ConfigError(f"{where}: '{key}' has unsupported type {tp}")  # schema bug


def _is_dataclass(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    # resolving annotations is the slowest part of validating a config; every row resolves it again
    return typing.get_type_hints(cls)


def check_range(value: Any, meta: Mapping[str, Any], key: str, where: str) -> None:
    """Apply a field's range rules (module docstring) to a checked value."""
    if value is None or not meta:
        return
    items = value if isinstance(value, list) else [value]
    if meta.get("non_empty") and isinstance(value, list) and not value:
        raise ConfigError(f"{where}: '{key}' must not be empty")
    if meta.get("unique") and len(set(items)) != len(items):
        dup = next(v for v in items if items.count(v) > 1)
        raise ConfigError(f"{where}: '{key}' repeats {dup!r} (values must be unique)")
    if "min" in meta:
        lo, strict = meta["min"], meta.get("min_exclusive", False)
        for v in items:
            if isinstance(v, int | float) and not isinstance(v, bool) and (v <= lo if strict else v < lo):
                need = f"> {lo}" if strict else f">= {lo}"
                raise ConfigError(f"{where}: '{key}' must be {need}, got {v!r}")
    if "max" in meta:
        hi = meta["max"]
        for v in items:
            if isinstance(v, int | float) and not isinstance(v, bool) and v > hi:
                why = f" ({meta['max_why']})" if meta.get("max_why") else ""
                raise ConfigError(f"{where}: '{key}' must be <= {hi}{why}, got {v!r}")


def build(cls: type, values: Mapping[str, Any], prefix: str, where: str,
          choices: Mapping[str, set[str]] | None = None) -> Any:
    """Strictly build dataclass `cls` from `values` (see module docstring). `choices` maps a dotted
    key (`<prefix>.<field>`) to its allowed string values."""
    hints = type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    dot = f"{prefix}." if prefix else ""
    unknown = sorted(set(values) - set(fields), key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key '{dot}{unknown[0]}' (known: {', '.join(sorted(fields))})")
    for name, f in fields.items():
        if name not in values and f.default is MISSING and f.default_factory is MISSING:
            raise ConfigError(f"{where}: missing key '{dot}{name}'")
    kwargs = {}
    for name, value in values.items():
        key = f"{dot}{name}"
        checked = check_type(value, hints[name], key, where)
        check_range(checked, fields[name].metadata, key, where)
        allowed = (choices or {}).get(key)
        for v in checked if isinstance(checked, list) else [checked]:
            if allowed is not None and v is not None and v not in allowed:
                raise ConfigError(f"{where}: '{key}' = {v!r} is not one of {sorted(allowed)}")
        kwargs[name] = checked
    try:
        return cls(**kwargs)
    except ValueError as err:  # the dataclass's own cross-field check (__post_init__)
        raise ConfigError(f"{where}: {err}") from None
