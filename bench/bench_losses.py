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
