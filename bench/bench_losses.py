"""Loss kernels at paper shapes on the CPU (item 2), float32, forward + backward.

ranked_info_nce: B = 512 anchors against 1 own key + a bank of 4096 / 8192 keys (N = bank + 1),
d = 128, R = 2 (taus 0.1, 0.225) and R = 3 (0.1, 0.2, 0.3), forms in / out / out_in, paper
positives ("rank"). Ranks follow a CIFAR-100-like hierarchy: rank 1 = same class (1 %), rank 2 =
same superclass (4 %), and for R = 3 rank 3 = same group of 4 superclasses (15 %).

Floor: the same similarity matmul ``q @ k.T`` plus one ``log_softmax`` over [B, N] (an InfoNCE with
the own key as the positive), forward + backward, timed interleaved with the candidate in one
process; ratio = median over rounds of candidate / floor timed back to back (times shown: medians).

Peak extra memory of the loss alone: ``sim`` is made a leaf before the measurement, then the loss
forward + backward (including ``sim.grad``) runs under ``torch.profiler`` with ``profile_memory``;
the exported trace has one ``[memory]`` event per CPU allocation and free with the allocator's
running ``Total Allocated``, so peak extra = max(Total Allocated) − the total before the first
event. Reported in units of one [B, N] float32 tensor; target ≤ 3 (the floor itself needs 3:
scaled logits, log-softmax output, gradient).

supcon_loss (GPaCo Eq. 3, the ``supcon`` / ``multitask`` methods) at the multi-task setting: both
views of 128 images are the B = 256 anchors, contrast = both views + a queue of K = 8192 (M = 8448),
d = 128, C = 1000, tau 0.07, LT form (each anchor weighted by its class's effective-number weight).
Floor: the same [B, M] matmul + one logsumexp, forward + backward; memory as for paco_loss, in
units of [B, M] beyond the similarity product itself.

ride_loss: E = 3 experts' scaled cosine logits (s = 30), B = 128, C = 1000, LDAM margins, diversity
weight -0.2, without DRW (T = 1) and with it (effective-number class weights, per-class
temperatures); class sizes from ``common.long_tail_counts`` (ImageNet-LT's n). Floor: 3 plain
cross-entropies on the same logits, forward + backward. Per expert RIDE does two softmaxes (LDAM CE
and the diversity KL) where the floor does one, plus one no-grad softmax of the ensemble: nominal
work ≈ 2.3× the floor; target ≤ 3×.

Threads: one by default. Both sides are then compute-bound and their ratio is the work ratio;
with 2 threads on a shared, oversubscribed 2-core machine the blockwise losses (hundreds of
small OpenMP regions per call) stall at every barrier while one big GEMM does not, and the
ratios swung from 1.1 to 17 between runs. ``--threads 2`` measures that setting anyway.

    PYTHONPATH=src .venv/bin/python bench/bench_losses.py [--repeats 7] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch
from common import Row, interleaved, median, paired_ratio

from semcl.losses import ranked_info_nce

TAUS = {2: [0.1, 0.225], 3: [0.1, 0.2, 0.3]}
LIMIT = {2: 1.5, 3: 2.0}


def _ranks(batch: int, bank: int, n_ranks: int, gen: torch.Generator) -> torch.Tensor:
    """[B, 1 + bank] ranks from random CIFAR-100-like labels; column 0 is the own key (rank 1)."""
    a = torch.randint(0, 100, (batch,), generator=gen)
    k = torch.randint(0, 100, (bank,), generator=gen)
    ranks = torch.zeros(batch, bank, dtype=torch.long)
    levels = [(a[:, None] // 5 // 4) == (k[None] // 5 // 4)] if n_ranks == 3 else []
    levels += [(a[:, None] // 5) == (k[None] // 5), a[:, None] == k[None]]
    for r, same in zip(range(n_ranks, 0, -1), levels, strict=True):
        ranks[same] = r
    return torch.cat([torch.ones(batch, 1, dtype=torch.long), ranks], dim=1)


def peak_extra_bytes(fn) -> int:
    """Peak bytes allocated by ``fn`` on the CPU above what was live before (see module doc)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
    finally:
        os.unlink(path)
    if not events:
        return 0
    totals = [e["args"]["Total Allocated"] for e in events]
    before = totals[0] - events[0]["args"]["Bytes"]
    return max(totals) - before


def _bank_rows(bank: int, repeats: int, gen: torch.Generator) -> list[Row]:
    batch, dim = 512, 128
    n = bank + 1
    unit = batch * n * 4  # bytes of one [B, N] float32 tensor
    q = torch.nn.functional.normalize(torch.randn(batch, dim, generator=gen), dim=1).requires_grad_()
    k = torch.nn.functional.normalize(torch.randn(n, dim, generator=gen), dim=1).requires_grad_()
    sim_leaf = (q @ k.T).detach().requires_grad_()

    def floor() -> None:
        logits = torch.log_softmax((q @ k.T) / 0.1, dim=1)
        (-logits[:, 0].mean()).backward()

    def floor_loss_only() -> None:
        sim_leaf.grad = None
        logits = torch.log_softmax(sim_leaf / 0.1, dim=1)
        (-logits[:, 0].mean()).backward()

    floor_mem = peak_extra_bytes(floor_loss_only) / unit
    rows = []
    for n_ranks in (2, 3):
        ranks = _ranks(batch, bank, n_ranks, gen)
        taus = TAUS[n_ranks]
        for form in ("in", "out", "out_in"):

            def cand(form=form, ranks=ranks, taus=taus) -> None:
                ranked_info_nce(q @ k.T, ranks, taus, form=form, positives="rank").backward()

            def cand_loss_only(form=form, ranks=ranks, taus=taus) -> None:
                sim_leaf.grad = None
                ranked_info_nce(sim_leaf, ranks, taus, form=form, positives="rank").backward()

            times = interleaved({"floor": floor, "cand": cand}, repeats)
            t_floor, t_cand = median(times["floor"]), median(times["cand"])
            ratio = paired_ratio(times, "cand", "floor")
            mem = peak_extra_bytes(cand_loss_only) / unit
            rows.append(Row(
                f"ranked_info_nce B={batch} N={bank}+1 d={dim} R={n_ranks} {form}",
                f"{1e3 * t_cand:.1f} ms; mem {mem:.2f}×[B,N]",
                f"{1e3 * t_floor:.1f} ms; mem {floor_mem:.2f}×[B,N] (matmul+log_softmax)",
                ratio, f"≤ {LIMIT[n_ranks]:g}×; mem ≤ 3×[B,N]", ratio <= LIMIT[n_ranks] and mem <= 3.0))
    return rows


def run(repeats: int = 9, quick: bool = False, threads: int = 1) -> list[Row]:
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _run(repeats, quick)
    finally:
        torch.set_num_threads(saved)


def _run(repeats: int, quick: bool) -> list[Row]:
    gen = torch.Generator().manual_seed(0)
    rows: list[Row] = []
    for bank in (4096,) if quick else (4096, 8192):
        rows += _bank_rows(bank, repeats, gen)
    rows += _paco_rows(repeats, gen)
    rows += _supcon_rows(repeats, gen)
    rows += _ride_rows(repeats, gen)
    return rows


def _paco_rows(repeats: int, gen: torch.Generator) -> list[Row]:
    """paco_loss as the PaCo / GPaCo methods call it: B = 128 queries (PaCo; contrast = queries +
    keys + queue) or 2 x 128 views (GPaCo; contrast = both views + queue), K = 8192, d = 128, C = 1000.
    Floor: the same [B, M] matmul plus one log_softmax over [B, M + C] (centre logits appended)."""
    try:
        from semcl.losses.paco import paco_loss
    except ImportError:
        return [Row("paco_loss B=128(x2) K=8192 d=128 C=1000", "not measured", "matmul+log_softmax over [B, M+C]",
                    None, "≤ 1.5×", None, "src/semcl/losses/paco.py does not exist")]
    dim, n_classes, queue = 128, 1000, 8192
    rows = []
    for name, n_anchor, n_extra in (("PaCo", 128, 128), ("GPaCo", 256, 0)):
        # contrast = anchors (+ momentum keys for PaCo) + queue; self = the anchor's own column
        anchors = torch.nn.functional.normalize(torch.randn(n_anchor, dim, generator=gen), dim=1).requires_grad_()
        rest = torch.nn.functional.normalize(torch.randn(n_extra + queue, dim, generator=gen), dim=1)
        n_cols = n_anchor + n_extra + queue
        labels = torch.randint(0, n_classes, (n_anchor,), generator=gen)
        contrast_labels = torch.cat([labels, torch.randint(0, n_classes, (n_extra + queue,), generator=gen)])
        if n_extra:
            contrast_labels[n_anchor : 2 * n_anchor] = labels  # PaCo: the keys share the queries' labels
        self_mask = torch.zeros(n_anchor, n_cols, dtype=torch.bool)
        self_mask[:, :n_anchor] = torch.eye(n_anchor, dtype=torch.bool)
        centres = torch.randn(n_anchor, n_classes, generator=gen).requires_grad_()
        prior = torch.rand(n_classes, generator=gen) + 0.1
        prior /= prior.sum()
        unit = n_anchor * (n_cols + n_classes) * 4

        def floor(anchors=anchors, rest=rest, centres=centres) -> None:
            contrast = torch.cat([anchors, rest])
            logits = torch.cat([anchors @ contrast.T / 0.2, centres], dim=1)
            (-torch.log_softmax(logits, dim=1)[:, 0].mean()).backward()

        def cand(anchors=anchors, rest=rest, centres=centres, labels=labels, contrast_labels=contrast_labels,
                 self_mask=self_mask, prior=prior) -> None:
            contrast = torch.cat([anchors, rest])
            paco_loss(anchors, contrast, contrast_labels, labels, centres, alpha=0.05, tau=0.2,
                      self_mask=self_mask, class_prior=prior).backward()

        times = interleaved({"floor": floor, "cand": cand}, repeats)
        ratio = paired_ratio(times, "cand", "floor")
        # paco_loss forms the [B, M] product itself, so both sides are measured from the features;
        # the product's own share (M / (M + C) of one unit) is taken off to judge the loss's extra.
        share = n_cols / (n_cols + n_classes)
        mem = peak_extra_bytes(cand) / unit - share
        floor_mem = peak_extra_bytes(floor) / unit - share
        rows.append(Row(
            f"paco_loss ({name}) B={n_anchor} M={n_cols} d={dim} C={n_classes}",
            f"{1e3 * median(times['cand']):.1f} ms; mem {mem:.2f}×[B,M+C]",
            f"{1e3 * median(times['floor']):.1f} ms; mem {floor_mem:.2f}×[B,M+C] (matmul+log_softmax)",
            ratio, "≤ 1.5×; mem ≤ 3×[B,N]", ratio <= 1.5 and mem <= 3.0,
            "mem = peak extra beyond the [B, M] similarity product"))
    return rows


def _supcon_rows(repeats: int, gen: torch.Generator) -> list[Row]:
    """supcon_loss at the multi-task setting (module doc); floor: the [B, M] matmul + logsumexp."""
    from common import long_tail_counts

    from semcl.losses.paco import supcon_loss
    from semcl.methods.base import DataInfo
    from semcl.methods.paco.method import effective_number_weights

    dim, n_classes, queue, half, tau = 128, 1000, 8192, 128, 0.07
    n_anchor = 2 * half
    n_cols = n_anchor + queue
    anchors = torch.nn.functional.normalize(torch.randn(n_anchor, dim, generator=gen), dim=1).requires_grad_()
    rest = torch.nn.functional.normalize(torch.randn(queue, dim, generator=gen), dim=1)
    labels = torch.randint(0, n_classes, (half,), generator=gen).repeat(2)  # both views share the labels
    contrast_labels = torch.cat([labels, torch.randint(0, n_classes, (queue,), generator=gen)])
    self_mask = torch.zeros(n_anchor, n_cols, dtype=torch.bool)
    self_mask.fill_diagonal_(True)  # the anchors are the first rows of the contrast set, as in the method
    info = DataInfo(num_classes=n_classes, in_channels=3, fine_to_coarse=None, class_counts=long_tail_counts())
    weights = effective_number_weights(info)[labels]
    unit = n_anchor * n_cols * 4  # bytes of one [B, M] float32 tensor

    def floor() -> None:
        anchors.grad = None
        contrast = torch.cat([anchors, rest])
        (anchors @ contrast.T / tau).logsumexp(1).mean().backward()

    def cand() -> None:
        anchors.grad = None
        contrast = torch.cat([anchors, rest])
        supcon_loss(anchors, contrast, contrast_labels, labels, tau=tau, self_mask=self_mask,
                    anchor_weights=weights).backward()

    times = interleaved({"floor": floor, "cand": cand}, repeats)
    ratio = paired_ratio(times, "cand", "floor")
    # both sides form the [B, M] product from the features: take that one unit off
    mem = peak_extra_bytes(cand) / unit - 1.0
    floor_mem = peak_extra_bytes(floor) / unit - 1.0
    return [Row(
        f"supcon_loss (multitask LT) B={n_anchor} M={n_cols} d={dim}",
        f"{1e3 * median(times['cand']):.1f} ms; mem {mem:.2f}×[B,M]",
        f"{1e3 * median(times['floor']):.1f} ms; mem {floor_mem:.2f}×[B,M] (matmul+logsumexp)",
        ratio, "≤ 1.5×; mem ≤ 3×[B,M]", ratio <= 1.5 and mem <= 3.0,
        "mem = peak extra beyond the [B, M] similarity product; anchors weighted by effective-number class weights")]


def _ride_rows(repeats: int, gen: torch.Generator) -> list[Row]:
    """ride_loss, 3 experts, with and without DRW (module doc); floor: 3 cross-entropies."""
    import torch.nn.functional as F
    from common import long_tail_counts

    from semcl.losses.ride import diversity_temperatures, effective_number_weights, ldam_margins, ride_loss

    batch, n_classes, n_experts, scale, dim = 128, 1000, 3, 30.0, 64
    counts = long_tail_counts()
    margins = ldam_margins(counts, 0.5).float()
    drw_weights = effective_number_weights(counts, 0.9999).float()
    drw_temps = diversity_temperatures(counts, 1.0, 0.02).float()
    logits = []
    for _ in range(n_experts):  # s * cos(feature, class weight), as the cosine classifiers give
        f = torch.nn.functional.normalize(torch.randn(batch, dim, generator=gen), dim=1)
        w = torch.nn.functional.normalize(torch.randn(n_classes, dim, generator=gen), dim=1)
        logits.append((scale * f @ w.T).requires_grad_())
    labels = torch.randint(0, n_classes, (batch,), generator=gen)

    def floor() -> None:
        for z in logits:
            z.grad = None
        sum(F.cross_entropy(z, labels) for z in logits).backward()

    def cand(drw: bool) -> None:
        for z in logits:
            z.grad = None
        ride_loss(logits, labels, margins=margins, scale=scale, class_weights=drw_weights if drw else None,
                  diversity_weight=-0.2, temperature=drw_temps if drw else 1.0).backward()

    times = interleaved({"floor": floor, "plain": lambda: cand(False), "drw": lambda: cand(True)}, 3 * repeats)
    rows = []
    for key, label in (("plain", "no DRW"), ("drw", "DRW")):
        ratio = paired_ratio(times, key, "floor")
        rows.append(Row(
            f"ride_loss E={n_experts} B={batch} C={n_classes} {label}",
            f"{1e3 * median(times[key]):.2f} ms",
            f"{1e3 * median(times['floor']):.2f} ms ({n_experts}× cross_entropy)",
            ratio, "≤ 3×", ratio <= 3.0))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="bank 4096 only")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {args.threads} threads")
    for r in run(args.repeats, args.quick, args.threads):
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        print(f"{r.stage:<48} {r.measured:<28} {r.floor:<48} {ratio:>5} {r.verdict} {r.note}")
