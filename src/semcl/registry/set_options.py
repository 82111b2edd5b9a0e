"""`--set` texts as settings: `key=value` (one variant), `key=a,b,c` or the same key repeated (a sweep: one variant
per value), two swept keys (the grid of their values). Keys are dotted config names (`optim.lr`), values YAML
scalars or flow lists, checked here for their names and syntax; the schema checks the values when the variant
rows are built (semcl.registry.variant_rows).

A value is split on the commas at its top level only: a comma inside [...], {...} or quotes stays, so
`probe.milestones=[30,60]` is one list and `probe.milestones=[30,60],[20,40]` a sweep over two; a string that
holds a comma is quoted (`key='"a,b"'`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
import unicodedata
from typing import Any

import yaml

from semcl.errors import ConfigError
from semcl.run_config import section_types
from semcl.yaml_strict import StrictLoader

# YAML 1.1 reads "1e-3" as a string; on the command line it means the number
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")
_OPEN, _CLOSE = "[{", "]}"


def method_fields(method: str | None) -> frozenset[str]:
    from semcl.registry.tables import method_config_fields as fields

    return fields(method)


def parse_value(raw: str, text: str) -> Any:
    """A YAML scalar or flow list (`0.1`, `true`, `null`, `crop_flip`, `[0.1, 0.225]`) of plain JSON data."""
    try:
        value = yaml.load(raw, Loader=StrictLoader) if raw else None  # no repeated keys, no alias bombs
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {text!r}: the value is not YAML ({getattr(err, 'problem', err)})") from None
    if isinstance(value, str) and _FLOAT.match(value):
        value = float(value)
    if isinstance(value, dict):
        raise ConfigError(f"--set {text!r}: the value must be a scalar or a list, not a mapping")
    _check_plain(value, text)
    return value


_PLAIN = (type(None), bool, int, float, str)
_BREAKS = ("Cc", "Cf", "Zl", "Zp")  # line breaks, tabs, other controls, invisible format characters


def _check_plain(value: Any, text: str) -> None:
    """`value` is JSON data (None, bool, number, string, list of those) whose strings are one line of text: a YAML
    tag such as `!!binary` (bytes) or `!!set` (a set) has no JSON form for a label or an id, and a line break
    would split the line `plan` prints for the variant. Refused rather than escaped, so no variant's folder name
    or run id depends on how a control character is shown."""
    key = text.partition("=")[0].strip()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif not isinstance(v, _PLAIN):
            raise ConfigError(f"--set {text!r}: key {key!r} has a value of YAML type {type(v).__name__}; only "
                              "numbers, strings, true/false, null and [lists] of them")
        elif isinstance(v, str):
            bad = next((ch for ch in v if unicodedata.category(ch) in _BREAKS), None)
            if bad is not None:
                raise ConfigError(f"--set {text!r}: key {key!r} holds the control character U+{ord(bad):04X}; "
                                  "one line of text only")


def check_key(key: str, text: str) -> None:
    """`key` names a field of the run config (a method field of some method for `method.*`)."""
    section, _, name = key.partition(".")
    if section == "method":
        if name == "name":
            raise ConfigError(f"--set {text!r}: key 'method.name' cannot be varied (a row's method is the row)")
        if name not in method_fields(None):
            raise ConfigError(f"--set {text!r}: unknown key {key!r} (no method has field {name!r}; "
                              "`semcl show <table>` lists each row's method and overrides)")
        return
    sections = section_types()
    if section not in sections or not name or "." in name:
        raise ConfigError(f"--set {text!r}: key {key!r} is not <section>.<field> with a section in "
                          f"{sorted((*sections, 'method'))}")
    known = sorted(f.name for f in dataclasses.fields(sections[section]))
    if name not in known:
        raise ConfigError(f"--set {text!r}: unknown key {key!r} (known in {section}: {', '.join(known)})")


def split_values(raw: str) -> list[str]:
    """The pieces of `raw` between its top-level commas (none inside brackets, braces or quotes)."""
    pieces, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(raw):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            pieces.append(raw[start:i].strip())
            start = i + 1
    return [*pieces, raw[start:].strip()]


def parse_values(texts: list[str] | None) -> dict[str, list[Any]]:
    """{dotted key: its values in the order given}, keys sorted (a label or a folder name does not depend on the
    order they were typed in)."""
    out: dict[str, list[Any]] = {}
    seen: dict[str, set[str]] = {}
    for text in texts or []:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {text!r}: expected key=value (e.g. optim.lr=0.1, or optim.lr=0.1,0.2 for one "
                              "variant per value)")
        check_key(key, text)
        pieces = split_values(raw.strip())
        if len(pieces) > 1 and "" in pieces:
            raise ConfigError(f"--set {text!r}: key {key!r} has an empty value in its list of values")
        for piece in pieces:
            value = parse_value(piece, text)
            if _identity(value) in seen.setdefault(key, set()):
                raise ConfigError(f"--set {text!r}: key {key!r} is given the value {show_value(value)} twice")
            seen[key].add(_identity(value))
            out.setdefault(key, []).append(value)
    return dict(sorted(out.items()))


def _identity(value: Any) -> str:
    return json.dumps(value, sort_keys=True)  # 1 and true are two values


# the most variants one `--set` grid may make: past it a typo (a key x 1000 values twice) would build and plan a
# million variants before printing anything
MAX_VARIANTS = 1000


def grid_size(values: dict[str, list[Any]]) -> int:
    return math.prod(len(v) for v in values.values())


def parse_grid(texts: list[str] | None) -> list[dict[str, Any]]:
    """One {dotted key: value} per variant: every combination of the keys' values (keys sorted, each key's
    values in the order given). ConfigError, before any is built, past MAX_VARIANTS."""
    values = parse_values(texts)
    size = grid_size(values)
    if size > MAX_VARIANTS:
        counts = " x ".join(f"{len(v)} ({k})" for k, v in values.items())
        raise ConfigError(f"--set: {counts} values make {size} variants, more than {MAX_VARIANTS} "
                          "(the most one command takes; split the sweep)")
    keys = list(values)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values.values())]


def parse_sets(texts: list[str] | None) -> dict[str, Any]:
    """{dotted key: value} of a single variant (no key given more than one value)."""
    values = parse_values(texts)
    swept = [k for k, v in values.items() if len(v) > 1]
    if swept:
        raise ConfigError(f"--set: key {swept[0]!r} is given {len(values[swept[0]])} values; one is expected here")
    return {k: v[0] for k, v in values.items()}


def show_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def settings_text(sets: dict[str, Any]) -> str:
    return ", ".join(f"{k}={show_value(v)}" for k, v in sets.items())


def sweep_text(texts: list[str] | None) -> str:
    """The settings as typed back: `optim.lr=0.1,0.2, method.tau=0.5` (a single variant: its settings_text)."""
    return ", ".join(f"{k}={','.join(show_value(v) for v in vs)}" for k, vs in parse_values(texts).items())


def slug(texts: list[str]) -> str:
    """A folder name for a set of settings: readable, and unique by its hash (a single variant's hashes its
    settings, as before sweeps existed; a sweep's hashes its list of variants)."""
    values, grid = parse_values(texts), parse_grid(texts)
    typed = ",".join(f"{k}={'_'.join(show_value(v) for v in vs)}" for k, vs in values.items())
    readable = re.sub(r"[^A-Za-z0-9._=-]+", "_", typed)[:60]
    body = grid[0] if len(grid) == 1 else grid
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    return f"{readable}-{digest}"
