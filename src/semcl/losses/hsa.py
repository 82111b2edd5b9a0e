"""HSA / CsMl multi-positive contrastive loss on a MoCo queue (docs/papers/hsa.md §c.1, §c.3-§c.5).

Notation: queries q (anchor q_a, neighbour q_p, CutMix q_mix) and keys k_a, k_p, all L2-normalised;
queue of K negatives n_1..n_K (rows of ``queue`` [K, D]); temperature tau; s(x, y) = x.y / tau.

MoCo InfoNCE (Eq. 1), per query::

    l(q, k) = -log( exp s(q,k) / (exp s(q,k) + sum_i exp s(q,n_i)) )

Two-positive loss for query q with its own key k_o and the paired image's key k_x, weights (w_o, w_x):

* ``form="code"`` (default; official code): two separate (K+1)-way softmaxes, the other positive
  absent from each denominator::

      L_q = w_o * l(q, k_o) + w_x * l(q, k_x)

* ``form="single_softmax"`` (variant; the paper's Eq. 2 might be this SupCon-style form)::

      L_q = -sum_{j in {o,x}, w_j > 0} w_j * log( exp s(q,k_j) / (sum_{m in {o,x}, w_m > 0} exp s(q,k_m)
                                                                 + sum_i exp s(q,n_i)) )

  A positive with weight 0 is left out of the denominator as well, so with (1, 0) both forms are
  MoCo's InfoNCE.

* ``form="byol"`` (the BYOL appendix rows; the paper's formulation is unknown, this is docs/papers/hsa.md §c.7's
  proposal): each InfoNCE term becomes BYOL's regression r(q, k) = 2 - 2 cos(q, k) of the predicted query
  onto the target key (the caller applies the predictor); the queue is not read::

      L_q = w_o * r(q, k_o) + w_x * r(q, k_x)

Terms (each a batch mean): L_{q_a} with (k_a, k_p) and weights (w_o, w_x) = (0.5, 0.5); L_{q_p} with
(k_p, k_a) and the same weights; L_{q_mix} with (k_a, k_p) and per-sample weights (lambda, 1 - lambda),
lambda the anchor's kept fraction. Total: L_{q_a} + L_{q_p} + L_{q_mix} (paper, ``reduction="sum"``) or
their mean (official code divides by 3, ``reduction="mean"``).

The official code sets (w_o, w_x) = (1, 0) while ``epoch > 10`` is false (0-indexed epochs 0..10):
:func:`neighbour_weights` with ``warmup_epochs=11`` reproduces that (``code`` variant); the paper has
no warm-up. With neighbour weight 0 and no mixing the total is MoCo v2's loss over anchors and
neighbours.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

FORMS = ("code", "single_softmax", "byol")
REDUCTIONS = ("sum", "mean")
CODE_WARMUP_EPOCHS = 11        # official main_moco.py: neighbour weight 0 unless epoch > 10


def neighbour_weights(
    epoch: int, *, own: float = 0.5, other: float = 0.5, warmup_epochs: int = 0
) -> tuple[float, float]:
    """(own, neighbour) key weights at ``epoch`` (0-indexed): (1, 0) during the warm-up, else (own, other)."""
    return (1.0, 0.0) if epoch < warmup_epochs else (own, other)


def info_nce(q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, tau: float) -> torch.Tensor:
    """Per-query MoCo InfoNCE l(q, k) [B] against the queue negatives [K, D] (MoCo's logits layout)."""
    l_pos = (q * k).sum(dim=1, keepdim=True)
    l_neg = q @ queue.detach().T
    logits = torch.cat([l_pos, l_neg], dim=1) / tau
    return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long, device=q.device), reduction="none")


def byol_regression(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Per-query BYOL loss [B]: ||q/|q| - k/|k| ||^2 = 2 - 2 cos(q, k) (Grill et al. 2020, Eq. 2)."""
    return 2.0 - 2.0 * (F.normalize(q, dim=1) * F.normalize(k, dim=1)).sum(dim=1)


def _as_weight(w: float | torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    w = torch.as_tensor(w, dtype=q.dtype, device=q.device)
    return w.expand(q.shape[0]) if w.ndim == 0 else w.to(q.dtype)


def two_positive_loss(
    q: torch.Tensor,
    k_first: torch.Tensor,
    k_second: torch.Tensor,
    queue: torch.Tensor,
    tau: float,
    w_first: float | torch.Tensor,
    w_second: float | torch.Tensor,
    *,
    form: str = "code",
) -> torch.Tensor:
    """Batch mean of the two-positive loss of ``q`` [B, D] (module docstring); weights scalars or [B]."""
    if form not in FORMS:
        raise ValueError(f"unknown HSA loss form {form!r}; known: {', '.join(FORMS)}")
    w1, w2 = _as_weight(w_first, q), _as_weight(w_second, q)
    if form == "byol":
        return (w1 * byol_regression(q, k_first) + w2 * byol_regression(q, k_second)).mean()
    if form == "code":
        return (w1 * info_nce(q, k_first, queue, tau) + w2 * info_nce(q, k_second, queue, tau)).mean()
    pos = torch.stack([(q * k_first).sum(dim=1), (q * k_second).sum(dim=1)], dim=1) / tau      # [B, 2]
    w = torch.stack([w1, w2], dim=1)
    pos = pos.masked_fill(w == 0, float("-inf"))          # a zero-weight positive leaves the denominator
    logits = torch.cat([pos, q @ queue.detach().T / tau], dim=1)
    log_p = logits.log_softmax(dim=1)[:, :2]
    # where, not w * log_p: 0 * -inf would be nan for the excluded positive
    return -torch.where(w > 0, w * log_p, torch.zeros_like(log_p)).sum(dim=1).mean()


def hsa_loss(
    q_a: torch.Tensor,
    q_p: torch.Tensor,
    k_a: torch.Tensor,
    k_p: torch.Tensor,
    queue: torch.Tensor,
    tau: float,
    *,
    weights: tuple[float, float] = (0.5, 0.5),
    q_mix: torch.Tensor | None = None,
    lam: float | torch.Tensor | None = None,
    form: str = "code",
    reduction: str = "sum",
) -> dict[str, torch.Tensor]:
    """The last-layer (or one stage's) HSA loss: L_{q_a} + L_{q_p} [+ L_{q_mix}] (Eq. 5).

    Args:
        q_a, q_p: queries of the anchors and of their drawn neighbours [B, D].
        k_a, k_p: their momentum keys [B, D] (the caller detaches them).
        queue: negatives [K, D].
        weights: (own, neighbour) key weights, e.g. from :func:`neighbour_weights`.
        q_mix: query of the CutMix image (anchor with a box of the neighbour), or ``None`` for no mixing.
        lam: the anchor's kept fraction, scalar or [B]; needed with ``q_mix``.
        form: ``"code"`` or ``"single_softmax"``.
        reduction: ``"sum"`` of the terms (paper) or their ``"mean"`` (official code: / 3).

    Returns:
        ``{"loss", "loss_anchor", "loss_neighbour"}`` plus ``"loss_mix"`` with mixing.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown HSA loss reduction {reduction!r}; known: {', '.join(REDUCTIONS)}")
    own, other = weights
    terms = {
        "loss_anchor": two_positive_loss(q_a, k_a, k_p, queue, tau, own, other, form=form),
        "loss_neighbour": two_positive_loss(q_p, k_p, k_a, queue, tau, own, other, form=form),
    }
    if q_mix is not None:
        if lam is None:
            raise ValueError("hsa_loss: q_mix needs lam, the anchor's kept fraction")
        lam_t = _as_weight(lam, q_mix)
        terms["loss_mix"] = two_positive_loss(q_mix, k_a, k_p, queue, tau, lam_t, 1.0 - lam_t, form=form)
    total = sum(terms.values())
    if reduction == "mean":
        total = total / len(terms)
    return {"loss": total, **terms}


def multi_positive_hsa_loss(
    q_a: torch.Tensor,
    q_ps: list[torch.Tensor],
    k_a: torch.Tensor,
    k_ps: list[torch.Tensor],
    queue: torch.Tensor,
    tau: float,
    *,
    weights: tuple[float, float] = (0.5, 0.5),
    q_mixes: list[torch.Tensor] | None = None,
    lams: list[float | torch.Tensor] | None = None,
    form: str = "code",
    reduction: str = "sum",
) -> dict[str, torch.Tensor]:
    """HSA with m >= 1 neighbours (and m mixed images) per anchor (HSA appendix, "more positives"; its
    formulation is unknown, this generalisation is ours and equals :func:`hsa_loss` at m = 1)::

        L_{q_a}     = mean_j two_positive(q_a; k_a, k_pj; w_o, w_x)
        L_{q_pj}    = two_positive(q_pj; k_pj, k_a; w_o, w_x)                for j = 1..m
        L_{q_mix,j} = two_positive(q_mix,j; k_a, k_pj; lam_j, 1 - lam_j)    (anchor with a box of x_pj)
        total       = L_{q_a} + sum_j L_{q_pj} + sum_j L_{q_mix,j}, or that sum / (1 + 2m) ("mean")

    i.e. the anchor's neighbour weight is shared by its m neighbours (code form: w_x / m each).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown HSA loss reduction {reduction!r}; known: {', '.join(REDUCTIONS)}")
    if not q_ps or len(q_ps) != len(k_ps):
        raise ValueError("multi_positive_hsa_loss: one key per neighbour query, at least one neighbour")
    own, other = weights
    m = len(q_ps)
    terms = {"loss_anchor": sum(two_positive_loss(q_a, k_a, k, queue, tau, own, other, form=form) for k in k_ps) / m}
    for j, (q, k) in enumerate(zip(q_ps, k_ps, strict=True)):
        terms[f"loss_neighbour{j}"] = two_positive_loss(q, k, k_a, queue, tau, own, other, form=form)
    if q_mixes is not None:
        if lams is None or len(lams) != len(q_mixes) or len(q_mixes) != m:
            raise ValueError("multi_positive_hsa_loss: one mixed query and one lam per neighbour")
        for j, (q, k, lam) in enumerate(zip(q_mixes, k_ps, lams, strict=True)):
            lam_t = _as_weight(lam, q)
            terms[f"loss_mix{j}"] = two_positive_loss(q, k_a, k, queue, tau, lam_t, 1.0 - lam_t, form=form)
    total = sum(terms.values())
    if reduction == "mean":
        total = total / len(terms)
    return {"loss": total, **terms}
