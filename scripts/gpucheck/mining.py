"""Section (g): HSA's kNN mining (semcl.data.semantics.neighbours.knn_table, the function HSA's mine() calls, with the paper
row's backend) on N synthetic features of the row's dimension on this device: time and peak memory, extrapolated
by N^2 to ImageNet's 1.28M images. Correctness on the same features: sampled rows' neighbours against a float64
brute-force ranking (their similarities must agree; ties may swap indices)."""

from __future__ import annotations

import time

import torch
from gpucheck.rows import IMAGENET_N, Sizes, paper_run, sync

SAMPLED_ROWS = 16
SIM_TOL = 1e-3  # fp32 cosine vs float64: a few 1e-6; TF32 or half-precision ranking would show as ~1e-3


def section(sizes: Sizes, device: torch.device) -> dict:
    from semcl.data.semantics.neighbours import knn_table

    run, _ = paper_run("hsa")
    backend = getattr(run.config.method, "knn_backend", "torch")
    g = torch.Generator(device=device).manual_seed(0)
    feats = torch.randn(sizes.mine_n, sizes.mine_dim, generator=g, device=device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    sync(device)
    t0 = time.perf_counter()
    table = knn_table(feats, sizes.mine_k, backend=backend)
    sync(device)
    seconds = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated(device) - base) / 2**30 if device.type == "cuda" else None
    rows = torch.linspace(0, sizes.mine_n - 1, SAMPLED_ROWS).long()
    unit = torch.nn.functional.normalize(feats.double(), dim=1)
    sims = unit[rows.to(device)] @ unit.T
    sims[torch.arange(SAMPLED_ROWS), rows.to(device)] = -2.0  # a sample is not its own neighbour
    want = sims.topk(sizes.mine_k, dim=1).values.cpu()
    got = torch.gather(sims, 1, table[rows].to(device).long()).cpu()
    err = float((got - want).abs().max())
    scale = (IMAGENET_N / sizes.mine_n) ** 2
    # "knn_seconds", not "seconds": the check's runner records each section's whole wall time as "seconds"
    return {"n": sizes.mine_n, "dim": sizes.mine_dim, "k": sizes.mine_k, "backend": backend,
            "table_shape": list(table.shape), "knn_seconds": round(seconds, 3),
            "peak_extra_gb": None if peak is None else round(peak, 3),
            "imagenet_seconds_estimate": round(seconds * scale, 1), "max_similarity_error": err,
            "ok": list(table.shape) == [sizes.mine_n, sizes.mine_k] and err < SIM_TOL}
