"""Measured training throughput for `semcl plan`'s estimate (semcl/data/files/train_throughput.csv).

Each row names its source (file, commit, GPU model, precision, batch). Three kinds:
- `train`: timm's training benchmark (RTX 3090, AMP, NCHW): the *relative* speed of the networks it covers;
- `anchor`: NVIDIA's ResNet-50 training throughput on an A100 80GB per precision (1 and 8 GPUs): the absolute
  level, so a timm network's A100 rate is timm(net) x anchor / timm(resnet50), and the FLOP formula's
  sustained rate is anchor x ResNet-50's training FLOPs;
- `loader`: per-worker loader throughput measured by `make bench` (bench/results.md).
Standard library only: `semcl plan` imports this without torch.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "data" / "files" / "train_throughput.csv"
RESNET50_TRAIN_FLOPS = 3 * 2 * 4.1e9  # fwd + bwd of one 224-px image: 3 forwards of 4.1 GMACs, 2 FLOPs each


@functools.cache
def rows() -> tuple[dict, ...]:
    with TABLE.open(newline="") as f:
        return tuple(csv.DictReader(f))


def _value(kind: str, network: str, **match) -> float:
    for r in rows():
        if r["kind"] == kind and r["network"] == network and all(r[k] == str(v) for k, v in match.items()):
            return float(r["value"])
    raise KeyError(f"{TABLE}: no {kind} row for {network} {match}")


def precision_key(amp: bool) -> str:
    return "amp" if amp else "tf32"  # fp32 convolutions run as TF32 on an A100 (PyTorch's cuDNN default)


def measured_rate(network: str, amp: bool) -> float | None:
    """fwd+bwd images/s of one A100 on `network` at 224 px, from the timm table scaled by the ResNet-50 anchor;
    None when timm has no row for it (then the FLOP formula applies)."""
    try:
        timm = _value("train", network)
    except KeyError:
        return None
    return timm * _value("anchor", "resnet50", precision=precision_key(amp), gpus=1) / _value("train", "resnet50")


def sustained_flops(amp: bool) -> float:
    """FLOP/s one A100 sustains in training (the anchor's ResNet-50 rate x its training FLOPs)."""
    return _value("anchor", "resnet50", precision=precision_key(amp), gpus=1) * RESNET50_TRAIN_FLOPS


def scaling_efficiency(gpus: int, amp: bool) -> float:
    """Per-GPU rate of a data-parallel job relative to one GPU: 1 at 1 GPU, the anchor's 8-GPU figure at 8 and
    beyond, log-linear in between."""
    if gpus <= 1:
        return 1.0
    key = precision_key(amp)
    e8 = _value("anchor", "resnet50", precision=key, gpus=8) / _value("anchor", "resnet50", precision=key, gpus=1)
    return 1 - (1 - e8) * min(math.log2(gpus) / 3, 1.0)


def loader_rate(name: str) -> float:
    """Samples/s one loader worker delivers (bench/results.md figures)."""
    return _value("loader", name)
