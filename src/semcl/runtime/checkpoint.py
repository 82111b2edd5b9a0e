"""Checkpoints that are atomic and safe to load.

Atomic: a job killed while saving leaves the previous checkpoint intact (a temp file unique to
the writer, in the same folder, then a rename). Safe: every file is read with
``torch.load(weights_only=True)``, which only rebuilds tensors and plain containers (dict,
list, tuple, str, int, float, bool, None): a crafted pickle in a results folder that was shared
or copied cannot run code. Everything saved is therefore kept to those types; the RNG states
in particular are stored as tensors (``rng_state``) rather than as the objects the libraries
hand out.
"""

from __future__ import annotations

import errno
import math
import pickle
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semcl.errors import ResultsError
from semcl.files import DISK_FULL, disk_full_message, write_atomic

RESTART = "delete it to restart the run from scratch"


# fsync before the rename: a run's checkpoint must survive a node crash. The preflight's scratch store
# is thrown away, and on a 200 MB ResNet checkpoint the fsync is most of the write (scratch_writes).
_DURABLE = [True]


@contextmanager
def scratch_writes() -> Iterator[None]:
    """Within: save_atomic still writes a temp file and renames it, without the fsync and without the zip
    records' CRC-32 (scratch folders only: read back by the same check, never copied; the checksum was half of a
    ResNet-50 checkpoint's 0.38 s save here, and torch.load reads a file without it as one with it)."""
    from torch.utils.serialization import config

    crc = config.save.compute_crc32
    _DURABLE.append(False)
    config.save.compute_crc32 = False
    try:
        yield
    finally:
        _DURABLE.pop()
        config.save.compute_crc32 = crc


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """torch.save to a temp file unique to this writer, fsync, then rename over `path`."""
    try:
        write_atomic(path, lambda f: torch.save(state, f), durable=_DURABLE[-1])
    except BaseException as err:
        full = isinstance(err, OSError) and err.errno in DISK_FULL
        # torch's zip writer reports a short write (a full disk) as "unexpected pos N vs M"
        if full or (isinstance(err, RuntimeError) and "unexpected pos" in str(err)):
            raise OSError(errno.ENOSPC, disk_full_message(path, f"saving the checkpoint: {_first_line(err)}"),
                          str(path)) from None
        if isinstance(err, OSError) and err.filename is None:
            raise OSError(err.errno, err.strerror or str(err), str(path)) from None
        raise


def safe_load(path: Path, remedy: str = RESTART) -> Any:
    """torch.load(weights_only=True); ResultsError naming `path` and `remedy` when the file is not
    a readable checkpoint or holds anything but tensors and plain containers."""
    from semcl.files import inflation_problem

    problem = inflation_problem(path) if Path(path).is_file() else None
    if problem:
        raise ResultsError(f"{path}: refused: {problem}; {remedy}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "weights only" in str(err).lower() or "weights_only" in str(err):
            raise ResultsError(f"{path}: refused: holds objects other than tensors and plain containers "
                               f"(loading it could run code); {remedy}") from None
        raise ResultsError(f"{path}: not a readable checkpoint ({_first_line(err)}); {remedy}") from None
    except (OSError, RuntimeError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: not a readable checkpoint ({_first_line(err)}); {remedy}") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def load(path: Path) -> dict[str, Any] | None:
    """The training state in `path`, None when there is none yet."""
    if not path.exists():
        return None
    state = safe_load(path)
    if not isinstance(state, dict) or "method" not in state:
        raise ResultsError(f"{path}: not a training checkpoint (no 'method' key); {RESTART}")
    return state


def load_resumable(path: Path) -> dict[str, Any] | None:
    """`load`, and every key a resume reads present and of its kind (one line naming the key otherwise)."""
    state = load(path)
    problem = None if state is None else _state_problem(state)
    if problem:
        raise ResultsError(f"{path}: {problem}; {RESTART}")
    return state


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


# what a resume reads from a training checkpoint, and the test each value must pass
STATE_KEYS: dict[str, tuple[str, Any]] = {
    "method": ("a mapping of tensors", lambda v: isinstance(v, dict)),
    "optimizer": ("a mapping", lambda v: isinstance(v, dict)),
    "epoch": ("a whole number >= 0", _is_count),
    "history": ("a list", lambda v: isinstance(v, list)),
    "rng": ("a mapping with python, numpy and torch states",
            lambda v: isinstance(v, dict) and {"python", "numpy", "torch"} <= set(v)),
}


def _state_problem(state: dict[str, Any]) -> str | None:
    """Why `state` cannot be resumed from (a key missing or of the wrong kind), None when it can: one line
    instead of a KeyError or TypeError in the middle of the restore."""
    for key, (want, ok) in STATE_KEYS.items():
        if key not in state:
            return f"key {key!r} missing (a resume needs {want})"
        if not ok(state[key]):
            return f"key {key!r} = {type(state[key]).__name__} {str(state[key])[:40]!r}: expected {want}"
    if "step" in state and not _is_count(state["step"]):
        return f"key 'step' = {state['step']!r}: expected a whole number >= 0"
    # one history entry per finished epoch is how a checkpoint is written: another count is a file that was edited
    # (an epoch of 10**6 would skip the training and be recorded as done)
    if len(state["history"]) != state["epoch"]:
        return f"key 'epoch' = {state['epoch']} but 'history' holds {len(state['history'])} finished epochs"
    for i, entry in enumerate(state["history"]):
        loss = entry.get("loss") if isinstance(entry, dict) else None
        if not isinstance(loss, (int, float)) or not math.isfinite(loss):
            return f"key 'history' entry {i} has loss {loss!r}: expected a finite number"
    return None


def restore(module: Any, state: dict[str, Any], path: Path) -> None:
    """`module.load_state_dict(state)` (a model or an optimiser); a checkpoint of another model, which torch
    reports in one line per key, is one line naming the file, how it differs and the remedy."""
    try:
        module.load_state_dict(state)
        return
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        differs = _first_line(err)
        own = module.state_dict()
        if isinstance(state, dict) and not ("state" in own and "param_groups" in own):  # a model: count keys
            missing = [k for k in own if k not in state]
            unexpected = [k for k in state if k not in own]
            shapes = [k for k in own if k in state and hasattr(own[k], "shape") and hasattr(state[k], "shape")
                      and tuple(own[k].shape) != tuple(state[k].shape)]
            parts = [f"{len(keys)} {what} (e.g. {keys[0]!r})"
                     for keys, what in ((missing, "missing keys"), (unexpected, "unexpected keys"),
                                        (shapes, "shape mismatches")) if keys]
            differs = ", ".join(parts) or differs
    raise ResultsError(f"{path}: a checkpoint of another model or config ({differs}); {RESTART}")


def rng_state() -> dict[str, Any]:
    """Python, numpy, torch CPU and (once CUDA is in use) this process's CUDA RNG states, as tensors
    and ints (loadable with weights_only).

    python: random.getstate() = (version, 625 uint32 words, gauss_next);
    numpy: np.random.get_state() = ('MT19937', 624 uint32 keys, pos, has_gauss, cached_gaussian);
    cuda: the current device's generator (dropout and drop-path masks drawn on the GPU)."""
    version, words, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": {"version": int(version), "words": torch.tensor(words, dtype=torch.int64),
                        "gauss": gauss},
             "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(w) for w in py["words"].tolist()), py["gauss"]))
    np.random.set_state(("MT19937", npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"],
                         npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
