"""Measured training throughput for `semcl plan`'s estimate (semcl/data/files/train_throughput.csv).

Each row names its source (file, commit, GPU model, precision, batch). Three kinds:
- `train`: timm's training benchmark (RTX 3090, AMP, NCHW): the *relative* speed of the networks it covers;
- `anchor`: NVIDIA's ResNet-50 training throughput on an A100 80GB per precision (1 and 8 GPUs): the absolute
  level, so a timm network's A100 rate is timm(net) x anchor / timm(resnet50), and the FLOP formula's
  sustained rate is anchor x ResNet-50's training FLOPs;
- `published`: a paper's or repository's own training run (img/s per GPU over a whole run, its fwd+bwd passes per
  image), brought to one A100 by NVIDIA's V100 -> A100 ResNet-50 figures; for the networks (and, where `methods`
  names them, the methods) it covers it wins over the two above: a whole run includes what a FLOP count misses
  (small inputs, attention, a momentum encoder's shuffle-BN, the run's own loader);
- `host`: the per-step host floor (dispatching a step's ops), below which no step of a small network goes;
- `loader`: per-worker loader throughput measured by `make bench` (bench/results.md; a test keeps them equal).
A user's file of the same columns ($SEMCL_THROUGHPUT, e.g. written from measured runs) is read first: its rows win.
Standard library only: `semcl plan` imports this without torch.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "data" / "files" / "train_throughput.csv"
RESNET50_TRAIN_FLOPS = 3 * 2 * 4.1e9  # fwd + bwd of one 224-px image: 3 forwards of 4.1 GMACs, 2 FLOPs each


def rows() -> tuple[dict, ...]:
    """The user's rows ($SEMCL_THROUGHPUT) first, then the packaged table."""
    user = os.environ.get("SEMCL_THROUGHPUT")
    return (_read(Path(user)) if user else ()) + _read(TABLE)


@functools.cache
def _read(path: Path) -> tuple[dict, ...]:
    from semcl.errors import ConfigError

    try:
        with path.open(newline="") as f:
            table = tuple(csv.DictReader(f))
    except OSError as err:
        raise ConfigError(f"{path}: unreadable throughput table ({err.strerror or err})") from None
    for i, r in enumerate(table, 2):
        try:
            float(r.get("value") or "")
        except ValueError:
            raise ConfigError(f"{path}:{i}: key 'value' is {r.get('value')!r}, not a number") from None
    return table


def _value(kind: str, network: str, **match) -> float:
    for r in rows():
        if r["kind"] == kind and r["network"] == network and all(r.get(k) == str(v) for k, v in match.items()):
            return float(r["value"])
    raise KeyError(f"{TABLE}: no {kind} row for {network} {match}")


def precision_key(amp: bool) -> str:
    return "amp" if amp else "tf32"  # fp32 convolutions run as TF32 on an A100 (PyTorch's cuDNN default)


def published_rate(network: str, method: str, amp: bool) -> tuple[float, int] | None:
    """(fwd+bwd images/s of one A100 at the run's input size, that size) from a published whole run of `network`
    (by `method` where the row names methods), or None. The run's per-GPU rate x its passes per image is
    brought to one GPU by the V100 scaling figure at its GPU count and to an A100 by the ResNet-50 ratio at the
    same precision class (TF32 / FP32, AMP / AMP)."""
    for r in rows():
        if r["kind"] != "published" or r["network"] != network:
            continue
        if (r.get("methods") or "").split() and method not in r["methods"].split():
            continue
        prec = "amp" if r["precision"] == "amp" else "fp32"
        v100 = _value("anchor", "resnet50", gpu="V100 16GB", precision=prec, gpus=1)
        v100_8 = _value("anchor", "resnet50", gpu="V100 16GB", precision=prec, gpus=8)
        efficiency = 1.0 if int(r["gpus"] or 1) <= 1 else v100_8 / v100
        a100 = _value("anchor", "resnet50", gpu="A100 80GB", precision=precision_key(amp), gpus=1)
        return float(r["value"]) * float(r["passes"] or 1) / efficiency * a100 / v100, int(r["img_size"] or 224)
    return None


def step_floor_s() -> float:
    """Seconds below which no optimisation step goes on a GPU host (dispatching its ops)."""
    return _value("host", "step_floor") / 1000


def measured_rate(network: str, amp: bool) -> float | None:
    """fwd+bwd images/s of one A100 on `network` at 224 px, from the timm table scaled by the ResNet-50 anchor;
    None when timm has no row for it (then the FLOP formula applies)."""
    try:
        timm = _value("train", network)
    except KeyError:
        return None
    return timm * _a100("resnet50", amp, 1) / _value("train", "resnet50")


def _a100(network: str, amp: bool, gpus: int) -> float:
    return _value("anchor", network, gpu="A100 80GB", precision=precision_key(amp), gpus=gpus)


def sustained_flops(amp: bool) -> float:
    """FLOP/s one A100 sustains in training (the anchor's ResNet-50 rate x its training FLOPs)."""
    return _a100("resnet50", amp, 1) * RESNET50_TRAIN_FLOPS


def scaling_efficiency(gpus: int, amp: bool) -> float:
    """Per-GPU rate of a data-parallel job relative to one GPU: 1 at 1 GPU, the anchor's 8-GPU figure at 8 and
    beyond, log-linear in between."""
    if gpus <= 1:
        return 1.0
    e8 = _a100("resnet50", amp, 8) / _a100("resnet50", amp, 1)
    return 1 - (1 - e8) * min(math.log2(gpus) / 3, 1.0)


def loader_rate(name: str) -> float:
    """Samples/s one loader worker delivers (bench/results.md figures)."""
    return _value("loader", name)
