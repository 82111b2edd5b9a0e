"""What every layout shares: the safe read of an official file, unwrapping its dict, and the strict conversion.

Nothing in the file runs: torch.load(weights_only=True) rebuilds only tensors and plain containers. Two
training scripts also pickle their argparse options (`'opt': Namespace(...)`, RINCE and RepDistiller's
last.pth): argparse.Namespace is admitted as a plain attribute bag, nothing else is.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from semcl.errors import DataError, ResultsError
from semcl.runtime.checkpoint import safe_load

_MODULE_PART = re.compile(r"(^|\.)module\.")


def read_official(path: Path, where: str) -> Any:
    """The file's object, read safely; DataError naming `where` (the file and the row) otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{where}: no such file")
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return safe_load(path, remedy="it is not the authors' checkpoint file as released")
    except ResultsError as err:
        raise DataError(f"{where}: {str(err).split(': ', 1)[1]}") from None


def strip_module(key: str) -> str:
    """`module.` parts of a (Distributed)DataParallel-wrapped model removed, wherever they stand."""
    return _MODULE_PART.sub(r"\1", key)


def map_key(key: str, buffers: Mapping[str, str], renames: tuple[tuple[str, str], ...]) -> str:
    """An official key (its `module.` parts removed) as semcl names it: a buffer by its whole name, else the first
    prefix that `renames` maps; an unknown key stays as it is, so the strict check reports it as unexpected."""
    if key in buffers:
        return buffers[key]
    for old, new in renames:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def unwrap_key(obj: Any, key: str) -> Mapping[str, Any]:
    """obj[key], the state dict a training script saved under `key` (ValueError naming what the file holds)."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"holds a {type(obj).__name__}, not the training script's checkpoint dict")
    if key not in obj or not isinstance(obj[key], Mapping):
        raise ValueError(f"no state dict under key {key!r} (keys: {', '.join(map(str, list(obj)[:6]))})")
    return obj[key]


def scalar_pointer(state: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The state with its queue pointer `key` as the scalar semcl's MemoryBank keeps: the official MoCo-style
    builders register it as `torch.zeros(1, dtype=torch.long)`, one element; any other shape is left to the strict
    shape check."""
    value = state.get(key)
    if isinstance(value, torch.Tensor) and tuple(value.shape) == (1,):
        return {**state, key: value.reshape(())}
    return state


def convert(state: Mapping[str, Any], rename: Callable[[str], str | None], want: Mapping[str, torch.Size],
            ours_alone: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """The official `state` under semcl's names, checked whole against `want` (semcl key -> shape): every
    official key maps (or is dropped by the layout) to a wanted key, every wanted key but `ours_alone` is
    filled, each shape matches. ValueError naming the first offending keys otherwise; nothing partial."""
    out: dict[str, torch.Tensor] = {}
    unexpected: list[str] = []
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"key {key!r} holds a {type(value).__name__}, not a tensor")
        new = rename(str(key))
        if new is None:
            continue
        if new not in want:
            unexpected.append(str(key))
            continue
        if new in out:
            raise ValueError(f"keys map twice onto {new!r} (the second: {key!r})")
        out[new] = value
    missing = [k for k in want if k not in out and k not in ours_alone]
    if unexpected or missing:
        parts = ([f"unexpected {', '.join(unexpected[:3])}"] if unexpected else []) + (
            [f"missing {', '.join(missing[:3])}"] if missing else [])
        raise ValueError(f"not this row's network: {'; '.join(parts)} "
                         f"({len(unexpected)} unexpected, {len(missing)} missing)")
    for key, value in out.items():
        if tuple(value.shape) != tuple(want[key]):
            raise ValueError(f"shape of {key!r} is {tuple(value.shape)}, the row's network has {tuple(want[key])}")
    return out
