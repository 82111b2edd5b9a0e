"""Contrastive representation distillation (Tian et al., ICLR 2020), RepDistiller semantics.

Embeddings: v_S = normalize(W_S h_S + b_S), v_T = normalize(W_T h_T + b_T) (128-d). Two memory banks
of N rows (one per network, uniform init in ±1/√(dim/3)) hold past embeddings of every training
sample. For an anchor i with negative indices n_1..n_K (positive = its own index i):
    student side: s_j = exp(⟨v_S(i), M_T[j]⟩ / τ) / Z_S,  j ∈ (i, n_1, ..., n_K)
    teacher side: t_j = exp(⟨v_T(i), M_S[j]⟩ / τ) / Z_T
Z_S, Z_T are estimated once from the first batch, Z = N · mean_{b,j} exp(⟨v, m_j⟩/τ), then fixed.
NCE with noise probability P_n = 1/N and K noise samples (CRD eq. 18, the code's form):
    L_side = −(1/B) Σ_b [ log( x_{b,0} / (x_{b,0} + K·P_n + ε) ) + Σ_{k≥1} log( K·P_n / (x_{b,k} + K·P_n + ε) ) ]
    L_CRD = L_S + L_T,  ε = 1e-7
(The paper writes h = e^{⟨·⟩/τ} / (e^{⟨·⟩/τ} + N/M), i.e. the same NCE posterior with Z absorbed.)
Variant "infonce": per side the softmax cross-entropy of the positive among [positive, K negatives]
with logits ⟨v, m_j⟩/τ, averaged over the batch; Z is not used.
After the scores, the banks move towards this batch's embeddings at the positive indices:
    M[i] ← normalize(m · M[i] + (1 − m) · v(i)),  m = 0.5
Negative indices come from outside ([B, K], e.g. sample_uniform_negatives or an SCNS sampler);
RepDistiller's default ('exact' mode) draws K = 16384 uniformly from the samples of the other classes,
without replacement unless the pool is smaller than K.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CRD_DIM = 128
CRD_T = 0.07
CRD_MOMENTUM = 0.5
NCE_EPS = 1e-7
CRD_OBJECTIVES = ("nce", "infonce")


def sample_uniform_negatives(index: Tensor, n_data: int, k: int, generator: torch.Generator | None = None,
                             labels: Tensor | None = None, exclude_self: bool = True) -> Tensor:
    """[B, K] negatives per anchor index: with ``labels`` ([N]) uniformly from the other classes
    (CRD 'exact'); without, uniformly from all N minus the anchor itself (``exclude_self=False``: all N,
    as CRD's label-free alias sampler). Without replacement unless the pool has fewer than K entries."""
    if k < 1 or n_data < 2:
        raise ValueError(f"sample_uniform_negatives: need k >= 1 and n_data >= 2, got k={k}, n_data={n_data}")
    if labels is not None and labels.shape != (n_data,):
        raise ValueError(f"sample_uniform_negatives: labels must have shape ({n_data},), got {tuple(labels.shape)}")
    everything = torch.arange(n_data)
    if labels is not None:  # indices sorted by class: a class's complement is two slices, no N-long mask per row
        labels = labels.cpu()
        order = torch.argsort(labels, stable=True)
        counts = torch.bincount(labels)
        ends = torch.cumsum(counts, 0).tolist()
    rows = []
    for i in index.tolist():
        if labels is not None:
            c = int(labels[i])
            pool = torch.cat([order[:ends[c] - int(counts[c])], order[ends[c]:]])
        elif exclude_self:
            pool = torch.cat([everything[:i], everything[i + 1:]])
        else:
            pool = everything
        if len(pool) == 0:
            raise ValueError(f"sample_uniform_negatives: anchor {i} has no negative (one class only?)")
        if k <= len(pool):
            pick = torch.randperm(len(pool), generator=generator)[:k]
        else:
            pick = torch.randint(len(pool), (k,), generator=generator)
        rows.append(pool[pick])
    return torch.stack(rows).to(index.device)


class Embed(nn.Module):
    """Linear projection to the contrastive space followed by L2 normalisation."""

    def __init__(self, dim_in: int, dim_out: int = CRD_DIM) -> None:
        super().__init__()
        self.linear = nn.Linear(dim_in, dim_out)

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.linear(x.flatten(1)), dim=1)


class LinearEmbed(nn.Module):
    """Linear projection without normalisation (RepDistiller models/util.py `LinearEmbed`: CC's embedding)."""

    def __init__(self, dim_in: int, dim_out: int = CRD_DIM) -> None:
        super().__init__()
        self.linear = nn.Linear(dim_in, dim_out)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x.flatten(1))


class ContrastMemory(nn.Module):
    """The two memory banks as buffers (a state_dict restores them exactly)."""

    def __init__(self, n_data: int, dim: int = CRD_DIM, momentum: float = CRD_MOMENTUM,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"ContrastMemory: momentum must lie in [0, 1), got {momentum}")
        self.momentum = momentum
        bound = 1.0 / math.sqrt(dim / 3)
        self.register_buffer("memory_s", (torch.rand(n_data, dim, generator=generator) * 2 - 1) * bound)
        self.register_buffer("memory_t", (torch.rand(n_data, dim, generator=generator) * 2 - 1) * bound)

    @property
    def n_data(self) -> int:
        return self.memory_s.shape[0]

    def logits(self, v_s: Tensor, v_t: Tensor, index: Tensor, negatives: Tensor, T: float) -> tuple[Tensor, Tensor]:
        """(student-anchored, teacher-anchored) logits ⟨v, m_j⟩/τ, [B, 1 + K], positive in column 0."""
        if negatives.dim() != 2 or negatives.shape[0] != index.shape[0]:
            raise ValueError(f"ContrastMemory: negatives must be [B, K] for B = {index.shape[0]}, got {tuple(negatives.shape)}")
        idx = torch.cat([index.view(-1, 1), negatives], dim=1)
        m_t = self.memory_t[idx].detach()  # [B, 1 + K, dim]
        m_s = self.memory_s[idx].detach()
        return (torch.einsum("bkd,bd->bk", m_t, v_s) / T, torch.einsum("bkd,bd->bk", m_s, v_t) / T)

    @torch.no_grad()
    def update_(self, v_s: Tensor, v_t: Tensor, index: Tensor) -> None:
        """M[i] ← normalize(m·M[i] + (1 − m)·v(i)) on both banks."""
        m = self.momentum
        for bank, v in ((self.memory_s, v_s), (self.memory_t, v_t)):
            new = F.normalize(bank[index] * m + v.detach().to(bank.dtype) * (1 - m), dim=1)
            bank.index_copy_(0, index, new)


def nce_loss(scores: Tensor, n_data: int, eps: float = NCE_EPS) -> Tensor:
    """CRD's NCE loss on normalised scores x = exp(⟨v, m⟩/τ)/Z, [B, 1 + K] with the positive first."""
    k = scores.shape[1] - 1
    noise = k / n_data  # K · P_n
    log_pos = torch.log(scores[:, 0] / (scores[:, 0] + noise + eps))
    log_neg = torch.log(noise / (scores[:, 1:] + noise + eps))
    return -(log_pos.sum() + log_neg.sum()) / scores.shape[0]


def infonce_loss(logits: Tensor) -> Tensor:
    """Softmax cross-entropy of column 0 among [positive, negatives], batch mean."""
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


def normalised(exp: Tensor, z: Tensor, n: int) -> Tensor:
    """exp / Z with the NCE normaliser Z (a float64 buffer, < 0: not estimated yet) set on the first batch to
    N · mean score, then fixed. Set and applied on the device: no host read (semcl.runtime.host_sync); the same
    float64 product the host made, the same division in exp's dtype."""
    z.copy_(torch.where(z < 0, exp.detach().mean().to(z.dtype) * n, z))
    return exp / z


class CRDLoss(nn.Module):
    """Embeddings + memory banks + fixed normalisers Z (buffers); forward returns L_S + L_T.

    Every forward call moves the banks (and the first one fixes Z): call it on training batches only.
    """

    def __init__(self, s_dim: int, t_dim: int, n_data: int, dim: int = CRD_DIM, T: float = CRD_T,
                 momentum: float = CRD_MOMENTUM, objective: str = "nce", generator: torch.Generator | None = None) -> None:
        super().__init__()
        if objective not in CRD_OBJECTIVES:
            raise ValueError(f"CRDLoss: objective must be one of {CRD_OBJECTIVES}, got {objective!r}")
        if T <= 0:
            raise ValueError(f"CRDLoss: temperature must be > 0, got {T}")
        self.embed_s = Embed(s_dim, dim)
        self.embed_t = Embed(t_dim, dim)
        self.memory = ContrastMemory(n_data, dim, momentum, generator)
        self.T = T
        self.objective = objective
        self.register_buffer("z_s", torch.tensor(-1.0, dtype=torch.float64))  # < 0: not estimated yet
        self.register_buffer("z_t", torch.tensor(-1.0, dtype=torch.float64))

    def forward(self, f_s: Tensor, f_t: Tensor, index: Tensor, negatives: Tensor) -> Tensor:
        v_s, v_t = self.embed_s(f_s), self.embed_t(f_t)
        logit_s, logit_t = self.memory.logits(v_s, v_t, index, negatives, self.T)
        if self.objective == "infonce":
            loss = infonce_loss(logit_s) + infonce_loss(logit_t)
        else:
            exp_s, exp_t = logit_s.exp(), logit_t.exp()
            n = self.memory.n_data
            loss = nce_loss(normalised(exp_s, self.z_s, n), n) + nce_loss(normalised(exp_t, self.z_t, n), n)
        self.memory.update_(v_s, v_t, index)
        return loss
