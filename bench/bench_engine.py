"""Per-epoch and per-evaluation bookkeeping of the training engine on the CPU, one thread.

Class-balanced epoch order: ``data.sampling.class_balanced_order(labels, 1000, gen)`` for
ImageNet-LT's n = 115,846 training labels (class sizes from ``common.long_tail_counts``: the CIFAR-LT
rule scaled to that n, shuffled), against ``torch.randperm(n)`` (what instance sampling costs) as the
floor. It runs once per epoch, so the absolute time is what matters; target ≤ 5×.

Logit scoring: ``evals.protocols.accuracy.logit_metrics`` (top-1 + many / medium / few accuracy, paco
convention) on 50,000 × 1000 float32 logits, ImageNet-LT's test set (50 images per class), what
``engine.ensemble.ensemble_metrics`` runs on the summed logits once they are loaded (that part is
store-bound and not timed). Floor: one ``argmax`` over the logits. Absolute time only (no target).

Memory layout (`model.memory_format`): one training step (forward, backward) of the demo's
``resnet_tiny`` on a batch of 256 28x28 one-channel images with channels-last weights, against the same
step in PyTorch's default NCHW layout. Target ≤ 0.8x (the demo profiles set channels_last for this).

Every pair runs interleaved in one process; ratio = median over rounds of candidate / floor.

    PYTHONPATH=src .venv/bin/python bench/bench_engine.py [--repeats 9] [--quick]
"""

from __future__ import annotations

import argparse

import torch
from common import Row, interleaved, long_tail_counts, long_tail_labels, median, paired_ratio


def run(repeats: int = 9, quick: bool = False) -> list[Row]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = torch.Generator().manual_seed(0)
        return (_sampling_rows(repeats, gen) + _logit_rows(max(3, repeats // 3) if quick else repeats, gen)
                + _layout_rows(repeats))
    finally:
        torch.set_num_threads(saved)


def _sampling_rows(repeats: int, gen: torch.Generator) -> list[Row]:
    from semcl.data.sampling import class_balanced_order

    counts = long_tail_counts()
    labels = long_tail_labels(counts, gen)
    n, n_classes = len(labels), len(counts)
    g_cand, g_floor = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    times = interleaved({"floor": lambda: torch.randperm(n, generator=g_floor),
                         "cand": lambda: class_balanced_order(labels, n_classes, g_cand)}, 3 * repeats)
    ratio = paired_ratio(times, "cand", "floor")
    return [Row(
        f"Epoch order: class_balanced, n={n:,} C={n_classes}",
        f"{1e3 * median(times['cand']):.2f} ms/epoch",
        f"{1e3 * median(times['floor']):.2f} ms (torch.randperm(n))",
        ratio, "≤ 5×", ratio <= 5.0,
        f"labels: CIFAR-LT rule n_i = int(n_max (1/256)^(i/999)), n_max ≈ {int(counts[0])} so that Σ n_i = {n:,} "
        f"(smallest class {int(counts[-1])}), shuffled")]


def _logit_rows(repeats: int, gen: torch.Generator) -> list[Row]:
    from semcl.evals.protocols.accuracy import logit_metrics

    n_classes, per_class = 1000, 50
    counts = long_tail_counts()
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    logits = torch.randn(len(labels), n_classes, generator=gen)
    logits[torch.arange(len(labels)), labels] += 3.5  # top-1 about 60 %, every group has hits
    out: dict[str, float] = {}

    def cand() -> None:
        out.update(logit_metrics(logits, labels, counts, ["paco"]))

    times = interleaved({"floor": lambda: logits.argmax(dim=1), "cand": cand}, repeats)
    ratio = paired_ratio(times, "cand", "floor")
    return [Row(
        f"Logit scoring: logit_metrics (paco), {len(labels):,} x {n_classes} float32",
        f"{1e3 * median(times['cand']):.1f} ms",
        f"{1e3 * median(times['floor']):.1f} ms (one argmax)",
        ratio, "— (absolute)", None,
        f"what an ensemble scores after summing its members' logits; top-1 {out['head_top1']:.1f} %, "
        f"many / medium / few {out['acc_many']:.1f} / {out['acc_medium']:.1f} / {out['acc_few']:.1f} %")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="fewer rounds of the logit scoring")
    args = parser.parse_args()
    for r in run(args.repeats, args.quick):
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        print(f"{r.stage:<60} {r.measured:<16} {r.floor:<36} {ratio:>6} {r.verdict} {r.note}")


def _layout_rows(repeats: int) -> list[Row]:
    import copy

    from semcl.models.backbones import resnet_tiny
    from semcl.models.layout import apply_memory_format

    torch.manual_seed(0)
    nchw = resnet_tiny(in_channels=1)
    nhwc = apply_memory_format(copy.deepcopy(nchw), "channels_last")
    x = torch.randn(256, 1, 28, 28)

    def step(model):
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    times = interleaved({"floor": lambda: step(nchw), "cand": lambda: step(nhwc)}, repeats)
    ratio = paired_ratio(times, "cand", "floor")
    return [Row("Train step layout: resnet_tiny channels_last / NCHW (B=256, 28x28, 1 thread)",
                f"{1e3 * median(times['cand']):.0f} ms/step", f"{1e3 * median(times['floor']):.0f} ms (NCHW)",
                ratio, "≤ 0.8×", ratio <= 0.8, "the mini profiles' model.memory_format: channels_last")]
