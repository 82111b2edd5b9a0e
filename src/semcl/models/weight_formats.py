"""Export a pre-trained ResNet-50 backbone for transfer: torchvision and detectron2 weight formats.

The suite's ``resnet50`` backbone is torchvision's ResNet-50 with ``fc`` replaced by the identity, so its
state dict already uses torchvision's names; only companion / projection heads and the momentum encoder
must be left behind (select the query backbone by ``prefix``, e.g. ``"backbone."`` in a run checkpoint's
``"method"`` state).

detectron2 names follow its documented ``tools/convert-torchvision-to-d2.py`` (also used by MoCo's and
the official HSA code's ``convert-pretrain-to-detectron2.py``), applied in this order to each key:

    1. a key without "layer" gets the prefix "stem."      conv1.weight      -> stem.conv1.weight
    2. "layer{t}" -> "res{t+1}"  (t = 1..4)                layer1.0.conv1... -> res2.0.conv1...
    3. "bn{t}"    -> "conv{t}.norm"  (t = 1..3)            bn1.running_mean  -> stem.conv1.norm.running_mean
    4. "downsample.0" -> "shortcut", "downsample.1" -> "shortcut.norm"

Values become numpy arrays; the pickle holds ``{"model": ..., "__author__": ..., "matching_heuristics":
True}``, the layout detectron2's checkpointer reads (``MODEL.WEIGHTS`` pointing at a ``.pkl``).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import torch

from semcl.errors import DataError
from semcl.files import write_atomic
from semcl.runtime.checkpoint import safe_load

FORMATS = ("torchvision", "detectron2")


@cache
def _resnet50_shapes() -> dict[str, tuple[int, ...]]:
    """torchvision ResNet-50 key -> shape, without ``fc`` (built on the meta device: no memory, no init cost)."""
    from torchvision.models import resnet50

    with torch.device("meta"):
        model = resnet50(weights=None)
    return {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith("fc.")}


def select_prefix(state: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The entries under ``prefix`` with the prefix removed (all entries when ``prefix`` is empty)."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def layout_mismatch(want: Mapping[str, tuple[int, ...]], sd: Mapping[str, torch.Tensor]
                    ) -> tuple[list[str], list[str], str | None]:
    """(keys of `want` missing from `sd`, keys of `sd` not in `want`, the first shared key whose shape differs,
    or None): what a strict load_state_dict of `sd` into a model with the shapes `want` would refuse."""
    missing, extra = [k for k in want if k not in sd], [k for k in sd if k not in want]
    bad = next((k for k, shape in want.items() if k in sd and tuple(sd[k].shape) != tuple(shape)), None)
    return missing, extra, bad


def to_torchvision_resnet50(state: Mapping[str, torch.Tensor], *, prefix: str = "") -> dict[str, torch.Tensor]:
    """Backbone weights under ``prefix`` as a torchvision ``resnet50`` state dict without ``fc``.

    Load it with ``resnet50(weights=None).load_state_dict(sd, strict=False)``: the only missing keys
    are ``fc.weight`` / ``fc.bias``. Raises ``ValueError`` naming the first missing, unexpected or
    mis-shaped key (e.g. a CIFAR-stem ResNet, whose names and stem differ).
    """
    sd = {k: v for k, v in select_prefix(state, prefix).items() if not k.startswith("fc.")}
    want = _resnet50_shapes()
    missing, extra, bad = layout_mismatch(want, sd)
    if missing or extra:
        what = f"missing {prefix}{missing[0]}" if missing else f"unexpected {prefix}{extra[0]}"
        raise ValueError(f"not a torchvision ResNet-50 backbone under prefix {prefix!r}: {what} "
                         f"({len(missing)} missing, {len(extra)} unexpected)")
    if bad is not None:
        raise ValueError(f"{prefix}{bad} has shape {tuple(sd[bad].shape)}, torchvision ResNet-50 expects {want[bad]}")
    return {k: sd[k].detach().cpu().clone() for k in want}


def detectron2_name(key: str) -> str:
    """The detectron2 R50 name of a torchvision ResNet key (module docstring, steps 1-4)."""
    if "layer" not in key:
        key = "stem." + key
    for t in (1, 2, 3, 4):
        key = key.replace(f"layer{t}", f"res{t + 1}")
    for t in (1, 2, 3):
        key = key.replace(f"bn{t}", f"conv{t}.norm")
    return key.replace("downsample.0", "shortcut").replace("downsample.1", "shortcut.norm")


def to_detectron2(state: Mapping[str, torch.Tensor], *, prefix: str = "") -> dict[str, object]:
    """Backbone weights under ``prefix`` -> ``{detectron2 name: numpy array}`` (checked as ResNet-50 first)."""
    sd = to_torchvision_resnet50(state, prefix=prefix)
    return {detectron2_name(k): v.numpy() for k, v in sd.items()}


def write_torchvision(state: Mapping[str, torch.Tensor], path: Path, *, prefix: str = "") -> Path:
    """``torch.save`` the torchvision-named backbone state dict to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = to_torchvision_resnet50(state, prefix=prefix)
    write_atomic(path, lambda f: torch.save(weights, f))  # a reader never loads half a file
    return path


def write_detectron2(state: Mapping[str, torch.Tensor], path: Path, *, prefix: str = "",
                     author: str = "semcl") -> Path:
    """Pickle ``{"model": ..., "__author__": author, "matching_heuristics": True}`` for detectron2."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"model": to_detectron2(state, prefix=prefix), "__author__": author, "matching_heuristics": True}
    write_atomic(path, lambda f: pickle.dump(payload, f))
    return path


def export_checkpoint(checkpoint: Path, out: Path, fmt: str, *, key: str = "method",
                      prefix: str = "backbone.") -> Path:
    """Export the backbone of a run checkpoint (``checkpoint[key]`` is the method's state dict).

    Heads, companion branches and the momentum encoder live under other prefixes and are dropped.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        raise DataError(f"{checkpoint}: checkpoint not found")
    # weights_only (the engine's safe load): a crafted checkpoint is refused, nothing in it runs
    state = safe_load(checkpoint, remedy="export only checkpoints semcl wrote")
    if not isinstance(state, Mapping) or not isinstance(state.get(key), Mapping):
        raise DataError(f"{checkpoint}: no state dict under key {key!r}")
    try:
        if fmt == "torchvision":
            return write_torchvision(state[key], out, prefix=prefix)
        return write_detectron2(state[key], out, prefix=prefix)
    except ValueError as err:
        raise DataError(f"{checkpoint}: key {key!r}: {err}") from None
