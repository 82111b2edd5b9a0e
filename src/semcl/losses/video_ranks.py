"""The video rows of RINCE Tab. 4 as rank matrices for one `ranked_info_nce` call.

Columns of ``sim`` per anchor a (query = online embedding of the anchor clip's first augmentation):
``[k_f(a), k_s(a), k_v(a), bank_1 .. bank_K]`` -- the momentum keys of x_f (same frames, other
augmentation), x_s (nearby clip) and x_v (clip >= 48 frames away) of a's own video, then the
memory bank (always negatives, rank 0). Ranks of the three own-video columns (docs/papers/rince.md §c.6; HP
and HN are named assumptions, the paper gives only their names):

    infonce  [1, -1, -1]  x_f the one positive; x_s, x_v unused              τ = (0.1,)
    hp       [1,  1,  1]  hard positives: x_s and x_v also positives (one rank) τ = (0.1,)
    hn       [1,  0,  0]  hard negatives: x_s and x_v negatives               τ = (0.1,)
    rince    [1,  2,  3]  one rank each, τ increasing                          τ = (0.1, 0.15, 0.2)

(-1 = takes no part.) Where the clip sampler could not keep x_v 48 frames away (``gap_ok`` False)
x_v's column is -1 in every row kind. Bank keys of the anchor's own video (``own_in_bank`` True;
keys enqueued in earlier epochs: with UCF101's 9,537 training videos a 65,536-key bank holds ~6.9
epochs, so ~6 keys of every video) are -1 too when given, so they are not counted as negatives.
With form "in" and "rank" positives, term r is
-log(Σ_{P_r} e / (Σ_{P_r} e + Σ_{N_r} e)), e = exp(s/τ_r), N_r = rank 0 ∪ ranks > r; summed over r.
"""

from __future__ import annotations

import torch

ROW_KINDS = {"infonce": (1, -1, -1), "hp": (1, 1, 1), "hn": (1, 0, 0), "rince": (1, 2, 3)}


def video_ranks(kind: str, gap_ok: torch.Tensor, bank_size: int,
                own_in_bank: torch.Tensor | None = None) -> torch.Tensor:
    """int64 ``[B, 3 + bank_size]`` ranks of the columns described in the module docstring;
    ``own_in_bank`` (bool ``[B, bank_size]``) marks bank keys of the anchor's own video: ignored."""
    if kind not in ROW_KINDS:
        raise ValueError(f"unknown video row kind {kind!r} (known: {', '.join(ROW_KINDS)})")
    b = gap_ok.shape[0]
    if own_in_bank is not None and own_in_bank.shape != (b, bank_size):
        raise ValueError(f"own_in_bank must be [{b}, {bank_size}], got {tuple(own_in_bank.shape)}")
    # built where the bank mask lives, by fills and `where` (no host copy, no mask-sized selection)
    device = own_in_bank.device if own_in_bank is not None else gap_ok.device
    first, second, third = ROW_KINDS[kind]
    gap = gap_ok.to(device, non_blocking=True).bool()
    column = torch.full((b,), first, dtype=torch.int64, device=device)
    own = torch.stack([column, column.new_full((b,), second), torch.where(gap, third, -1)], dim=1)
    bank = (-own_in_bank.to(torch.int64) if own_in_bank is not None
            else torch.zeros(b, bank_size, dtype=torch.int64, device=device))
    return torch.cat([own, bank], dim=1)


def video_similarities(q: torch.Tensor, kf: torch.Tensor, ks: torch.Tensor, kv: torch.Tensor,
                       bank: torch.Tensor) -> torch.Tensor:
    """``[B, 3 + K]``: ``q·k_f, q·k_s, q·k_v`` per row, then ``q @ bank.T`` (all L2-normalised)."""
    own = torch.stack([(q * kf).sum(1), (q * ks).sum(1), (q * kv).sum(1)], dim=1)
    return torch.cat([own, q @ bank.T], dim=1)
