"""Quick CPU timing of ranked_info_nce and paco_loss against plain softmax baselines.

ratio = time(sim = q @ kᵀ, then the loss, forward + backward)
      / time(the same sim matmul + one log_softmax over [B, N], forward + backward)
Targets: <= 1.5 for R = 2 and <= 2 for R = 3 at B = 512, N = 4096 / 8192, float32; paco_loss
(B = 2 x 128 anchors, K = 8192 samples, C = 1000 centres) against the same matmul plus one
log_softmax over [B, C + K], target <= 1.5.

Ranks follow the CIFAR-100 RINCE set-up: column 0 is the anchor's own key (rank 1), same class
= rank 1, same superclass (5 classes) = rank 2, same group of 20 classes = rank 3 (R = 3 only).
Baseline and loss run alternately and the best of ``--repeats`` is kept, so that load from other
processes on a shared machine hits both alike. ``--threads 1`` gives the steadiest numbers there.

    PYTHONPATH=src .venv/bin/python bench/bench_losses_quick.py [--dim 128] [--repeats 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from semcl.losses import paco_loss, ranked_info_nce


def best_ms(fns: list[Callable[[], None]], repeats: int) -> list[float]:
    for fn in fns:  # warm-up: allocator, thread pool
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return [1e3 * t for t in best]


def make_ranks(n_rows: int, n_cols: int, n_ranks: int, gen: torch.Generator) -> torch.Tensor:
    anchor = torch.randint(0, 100, (n_rows, 1), generator=gen)
    queue = torch.randint(0, 100, (1, n_cols), generator=gen)
    ranks = torch.zeros(n_rows, n_cols, dtype=torch.long)
    for rank, width in reversed(list(enumerate([1, 5, 20][:n_ranks], start=1))):
        ranks[anchor // width == queue // width] = rank
    ranks[:, 0] = 1
    return ranks


def bench_paco(dim: int, repeats: int, gen: torch.Generator) -> None:
    n_rows, n_cols, n_classes = 256, 8192, 1000
    q = torch.nn.functional.normalize(torch.randn(n_rows, dim, generator=gen), dim=1).requires_grad_()
    k = torch.nn.functional.normalize(torch.randn(n_cols, dim, generator=gen), dim=1).requires_grad_()
    centres = torch.randn(n_rows, n_classes, generator=gen).requires_grad_()
    anchor_labels = torch.randint(0, n_classes, (n_rows,), generator=gen)
    contrast_labels = torch.randint(0, n_classes, (n_cols,), generator=gen)
    contrast_labels[:n_rows] = anchor_labels  # the first n_rows samples are the anchors' own keys
    self_mask = torch.zeros(n_rows, n_cols, dtype=torch.bool)
    self_mask[torch.arange(n_rows), torch.arange(n_rows)] = True
    prior = torch.rand(n_classes, generator=gen) + 0.1

    def baseline() -> None:
        logits = torch.log_softmax(torch.cat([centres, (q @ k.T) / 0.2], 1), dim=1)
        (-logits[:, 0].mean()).backward()

    def loss() -> None:
        paco_loss(q, k, contrast_labels, anchor_labels, centres, alpha=0.05, tau=0.2, self_mask=self_mask,
                  class_prior=prior).backward()

    base_ms, loss_ms = best_ms([baseline, loss], repeats)
    print(f"paco B={n_rows} K={n_cols} C={n_classes}  loss {loss_ms:7.2f} ms  baseline {base_ms:6.2f} ms"
          f"  ratio {loss_ms / base_ms:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--cols", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dim", type=int, default=128, help="feature size of the sim matmul")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, B={args.batch}, d={args.dim}")
    bench_paco(args.dim, args.repeats, gen)
    for n_cols in args.cols:
        q = torch.nn.functional.normalize(torch.randn(args.batch, args.dim, generator=gen), dim=1).requires_grad_()
        k = torch.nn.functional.normalize(torch.randn(n_cols, args.dim, generator=gen), dim=1).requires_grad_()

        def baseline(q=q, k=k) -> None:
            logits = torch.log_softmax((q @ k.T) / 0.1, dim=1)
            (-logits[:, 0].mean()).backward()

        for n_ranks, taus in ((2, [0.1, 0.225]), (3, [0.1, 0.2, 0.3])):
            ranks = make_ranks(args.batch, n_cols, n_ranks, gen)
            for form in ("in", "out", "out_in"):
                for positives in ("rank", "cumulative"):

                    def loss(q=q, k=k, ranks=ranks, taus=taus, form=form, positives=positives) -> None:
                        ranked_info_nce(q @ k.T, ranks, taus, form=form, positives=positives).backward()

                    base_ms, loss_ms = best_ms([baseline, loss], args.repeats)
                    print(f"N={n_cols} R={n_ranks} {form:6s} {positives:10s}  loss {loss_ms:7.2f} ms"
                          f"  baseline {base_ms:6.2f} ms  ratio {loss_ms / base_ms:.2f}", flush=True)


if __name__ == "__main__":
    main()
