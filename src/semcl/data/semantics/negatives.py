"""Negative samplers for contrastive distillation: CRD's uniform baseline and SCNS's class- and
instance-conditioned samplers (docs/papers/scns.md §c.2, §c.3, §c.5).

Every sampler answers ``sample(indices, labels, num_negatives, generator) -> LongTensor [B, K]`` of
training-set indices, never of the anchor's own class, drawing only from ``generator`` (the engine's
per-epoch CPU generator: same generator state, same negatives, so a resumed epoch redraws them), and
has ``fingerprint()``, a sha256 of what defines its distribution, for run ids.

* :class:`UniformNegatives` (CRD ``exact`` mode): K indices uniformly from all other-class samples,
  without replacement unless K exceeds that pool.
* :class:`ClassConditionedNegatives` (SCNS-class): N_k(c) = the k classes most similar to c (c itself
  excluded, ties to the lower class index, empty classes excluded); p(c'|c) = max(s, 0) / sum over
  N_k(c) of max(s, 0) -- negative similarities are clipped to 0, so a dissimilar class in the top-k is
  never drawn; if no similarity in N_k(c) is positive, p is uniform on N_k(c) (assumptions, docs/papers/scns.md
  §c.2). Variant ``weighting="softmax"``: p(c'|c) = exp(s / T) / sum exp(s / T) on N_k(c). Each of the
  K negatives draws a class from p(.|y), then an instance uniformly from that class (with replacement:
  k classes of a few hundred images hold fewer than CRD's 16,384 negatives).
* :class:`InstanceConditionedNegatives` (SCNS-instance): each sample's pool is its k most
  cosine-similar samples of other classes under fixed features (the teacher's penultimate layer),
  computed once in chunks; negatives are drawn from the pool uniformly (without replacement when
  K <= k) or, variant ``weighting="similarity"``, with replacement and probability proportional to
  the similarity clipped at 0 (uniform when none is positive).
"""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F


def tensor_sha256(*tensors: torch.Tensor, extra: str = "") -> str:
    """sha256 over dtype, shape and bytes of each tensor (CPU, contiguous), then ``extra``."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    h.update(extra.encode())
    return h.hexdigest()


class _ByClass:
    """Dataset indices grouped by class: class c's members are ``order[start[c] : start[c] + count[c]]``."""

    def __init__(self, labels: torch.Tensor, num_classes: int | None = None) -> None:
        labels = torch.as_tensor(labels, dtype=torch.int64).cpu()
        if labels.ndim != 1 or labels.numel() == 0 or int(labels.min()) < 0:
            raise ValueError("labels must be a non-empty 1-d tensor of class ids >= 0")
        self.labels = labels
        self.num_classes = int(labels.max()) + 1 if num_classes is None else num_classes
        self.order = torch.argsort(labels, stable=True)
        self.count = torch.bincount(labels, minlength=self.num_classes)
        self.start = torch.cumsum(self.count, 0) - self.count

    def uniform_member(self, classes: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One uniformly drawn member of each entry of ``classes`` (any shape)."""
        u = torch.rand(classes.shape, generator=generator, dtype=torch.float64)
        n = self.count[classes]
        offset = torch.minimum((u * n).long(), n - 1)
        return self.order[self.start[classes] + offset]


class UniformNegatives:
    """CRD's sampler: K of the other-class samples, uniformly, without replacement when possible."""

    def __init__(self, labels: torch.Tensor, num_classes: int | None = None) -> None:
        self.by_class = _ByClass(labels, num_classes)

    def sample(self, indices: torch.Tensor, labels: torch.Tensor, num_negatives: int, generator: torch.Generator) -> torch.Tensor:
        bc = self.by_class
        n = bc.labels.numel()
        rows = []
        for y in labels.tolist():
            pool = n - int(bc.count[y])
            if pool <= 0:
                raise ValueError(f"class {y} has no other-class samples to draw negatives from")
            if num_negatives <= pool:
                pos = torch.randperm(pool, generator=generator)[:num_negatives]
            else:
                pos = torch.randint(pool, (num_negatives,), generator=generator)
            # Position p in the other-class list skips over class y's block of the sorted order.
            start, cnt = int(bc.start[y]), int(bc.count[y])
            rows.append(bc.order[torch.where(pos < start, pos, pos + cnt)])
        return torch.stack(rows) if rows else torch.empty(0, num_negatives, dtype=torch.int64)

    def fingerprint(self) -> str:
        return tensor_sha256(self.by_class.labels, extra="uniform")


def class_negative_distribution(similarity: torch.Tensor, k: int, weighting: str = "similarity",
                                temperature: float = 0.1, available: torch.Tensor | None = None) -> torch.Tensor:
    """P[c, c'] = p(c' | c) of SCNS-class (module docstring); rows sum to 1, float64 [C, C]."""
    sim = torch.as_tensor(similarity, dtype=torch.float64)
    c = sim.shape[0]
    if sim.shape != (c, c):
        raise ValueError(f"similarity must be square, got {tuple(sim.shape)}")
    allowed = ~torch.eye(c, dtype=torch.bool)
    if available is not None:
        allowed &= available.bool()[None, :]
    n_allowed = int(allowed.sum(1).min())
    if not 1 <= k <= n_allowed:
        raise ValueError(f"top-k must be in [1, {n_allowed}] (other non-empty classes), got {k}")
    # Ties go to the lower class index: a stable sort on -s.
    order = torch.argsort(torch.where(allowed, -sim, torch.inf), dim=1, stable=True)[:, :k]
    s = sim.gather(1, order)
    if weighting == "similarity":
        w = s.clamp_min(0.0)
        w = torch.where(w.sum(1, keepdim=True) > 0, w, torch.ones_like(w))
    elif weighting == "softmax":
        w = torch.softmax(s / temperature, dim=1)
    else:
        raise ValueError(f"unknown class weighting {weighting!r}; use similarity or softmax")
    probs = torch.zeros_like(sim)
    probs.scatter_(1, order, w / w.sum(1, keepdim=True))
    return probs


class ClassConditionedNegatives:
    """SCNS-class sampler over the top-k word-similar classes (module docstring)."""

    def __init__(self, labels: torch.Tensor, similarity: torch.Tensor, k: int = 10,
                 weighting: str = "similarity", temperature: float = 0.1) -> None:
        c = similarity.shape[0]
        self.by_class = _ByClass(labels, c)
        if int(self.by_class.labels.max()) >= c:
            raise ValueError(f"labels go up to class {int(self.by_class.labels.max())} but the similarity matrix has {c} classes")
        self.similarity = torch.as_tensor(similarity, dtype=torch.float64).cpu()
        self.k, self.weighting, self.temperature = k, weighting, temperature
        self.probs = class_negative_distribution(self.similarity, k, weighting, temperature, self.by_class.count > 0)

    def sample(self, indices: torch.Tensor, labels: torch.Tensor, num_negatives: int, generator: torch.Generator) -> torch.Tensor:
        classes = torch.multinomial(self.probs[labels.cpu()], num_negatives, replacement=True, generator=generator)
        return self.by_class.uniform_member(classes, generator)

    def fingerprint(self) -> str:
        return tensor_sha256(self.by_class.labels, self.probs, extra=f"class:{self.k}:{self.weighting}:{self.temperature}")


@torch.no_grad()
def instance_negative_pools(features: torch.Tensor, labels: torch.Tensor, k: int,
                            chunk_size: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sample's k most cosine-similar other-class samples: (pools [N, k] int64, similarities [N, k]).

    Rows of ``features`` are L2-normalised; S = F F^T is computed ``chunk_size`` rows at a time so
    memory stays chunk_size x N; same-class entries are masked before the top-k.
    """
    feats = F.normalize(features.detach().float(), dim=1)
    labels = torch.as_tensor(labels, dtype=torch.int64, device=feats.device)
    n = feats.shape[0]
    fewest = n - int(torch.bincount(labels).max())
    if not 1 <= k <= fewest:
        raise ValueError(f"instance top-k must be in [1, {fewest}] (the smallest other-class pool), got {k}")
    pools, sims = [], []
    for lo in range(0, n, chunk_size):
        s = feats[lo : lo + chunk_size] @ feats.T
        s.masked_fill_(labels[lo : lo + chunk_size, None] == labels[None, :], -torch.inf)
        val, idx = s.topk(k, dim=1)
        pools.append(idx.cpu())
        sims.append(val.cpu())
    return torch.cat(pools), torch.cat(sims)


class InstanceConditionedNegatives:
    """SCNS-instance sampler over fixed per-sample pools (module docstring)."""

    def __init__(self, pools: torch.Tensor, similarities: torch.Tensor | None = None, weighting: str = "uniform") -> None:
        if weighting not in ("uniform", "similarity"):
            raise ValueError(f"unknown instance weighting {weighting!r}; use uniform or similarity")
        if weighting == "similarity" and similarities is None:
            raise ValueError("weighting='similarity' needs the pool similarities")
        self.pools = torch.as_tensor(pools, dtype=torch.int64).cpu()
        self.weighting = weighting
        self.weights = None
        if weighting == "similarity":
            w = torch.as_tensor(similarities, dtype=torch.float64).cpu().clamp_min(0.0)
            self.weights = torch.where(w.sum(1, keepdim=True) > 0, w, torch.ones_like(w))

    @classmethod
    def from_features(cls, features: torch.Tensor, labels: torch.Tensor, k: int = 10, weighting: str = "uniform",
                      chunk_size: int = 512) -> InstanceConditionedNegatives:
        pools, sims = instance_negative_pools(features, labels, k, chunk_size)
        return cls(pools, sims, weighting)

    def sample(self, indices: torch.Tensor, labels: torch.Tensor, num_negatives: int, generator: torch.Generator) -> torch.Tensor:
        pools = self.pools[indices.cpu()]
        b, k = pools.shape
        if self.weights is not None:
            pick = torch.multinomial(self.weights[indices.cpu()], num_negatives, replacement=True, generator=generator)
        elif num_negatives <= k:
            # Without replacement: the first K of a random permutation of each pool.
            pick = torch.rand(b, k, generator=generator).argsort(dim=1)[:, :num_negatives]
        else:
            pick = torch.randint(k, (b, num_negatives), generator=generator)
        return pools.gather(1, pick)

    def fingerprint(self) -> str:
        extra = f"instance:{self.weighting}"
        return tensor_sha256(self.pools, *([self.weights] if self.weights is not None else []), extra=extra)
