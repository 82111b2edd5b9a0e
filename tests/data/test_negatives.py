"""Negative samplers: exact distributions on hand-made similarity matrices, support, determinism."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.data.semantics.negatives import (
    ClassConditionedNegatives,
    InstanceConditionedNegatives,
    UniformNegatives,
    class_negative_distribution,
    instance_negative_pools,
    tensor_sha256,
)

# Five classes; row 0 ranks the others 1 (0.8), 2 (0.4), 4 (0.2), 3 (-0.3).
SIM = torch.tensor([
    [1.0, 0.8, 0.4, -0.3, 0.2],
    [0.8, 1.0, 0.1, 0.5, 0.5],
    [0.4, 0.1, 1.0, 0.0, -0.2],
    [-0.3, 0.5, 0.0, 1.0, -0.1],
    [0.2, 0.5, -0.2, -0.1, 1.0],
], dtype=torch.float64)  # fmt: skip
# 12 samples, class sizes 3, 2, 4, 1, 2, interleaved.
LABELS = torch.tensor([2, 0, 1, 2, 4, 0, 3, 2, 1, 0, 4, 2])


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def members(c: int) -> set[int]:
    return set(torch.nonzero(LABELS == c).flatten().tolist())


def test_class_distribution_by_hand():
    p = class_negative_distribution(SIM, k=3)
    torch.testing.assert_close(p[0], torch.tensor([0, 0.8, 0.4, 0, 0.2], dtype=torch.float64) / 1.4, rtol=0, atol=1e-15)
    # k = 4 brings class 3 (s = -0.3) into N_k(0), but its clipped weight is 0: same distribution.
    torch.testing.assert_close(class_negative_distribution(SIM, k=4)[0], p[0], rtol=0, atol=0)
    # Row 1: 0.8, then a tie 0.5 / 0.5 between classes 3 and 4 -> k = 2 keeps the lower index, 3.
    torch.testing.assert_close(class_negative_distribution(SIM, k=2)[1],
                               torch.tensor([0.8, 0, 0, 0.5, 0], dtype=torch.float64) / 1.3, rtol=0, atol=1e-15)
    # Row 4 with k = 3: 0.5 (1), 0.2 (0), -0.1 (3): class 3 clipped.
    torch.testing.assert_close(class_negative_distribution(SIM, k=3)[4],
                               torch.tensor([0.2, 0.5, 0, 0, 0], dtype=torch.float64) / 0.7, rtol=0, atol=1e-15)
    torch.testing.assert_close(p.sum(1), torch.ones(5, dtype=torch.float64))
    assert (p.diagonal() == 0).all()


def test_class_distribution_all_nonpositive_falls_back_to_uniform_and_softmax():
    sim = torch.tensor([[1.0, -0.1, -0.5], [-0.1, 1.0, 0.3], [-0.5, 0.3, 1.0]], dtype=torch.float64)
    p = class_negative_distribution(sim, k=2)
    torch.testing.assert_close(p[0], torch.tensor([0, 0.5, 0.5], dtype=torch.float64), rtol=0, atol=0)
    q = class_negative_distribution(SIM, k=3, weighting="softmax", temperature=0.5)
    e = [math.exp(s / 0.5) for s in (0.8, 0.4, 0.2)]
    expect = torch.tensor([0, e[0], e[1], 0, e[2]], dtype=torch.float64) / sum(e)
    torch.testing.assert_close(q[0], expect, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="top-k"):
        class_negative_distribution(SIM, k=5)


def test_class_sampler_frequencies_and_support():
    sampler = ClassConditionedNegatives(LABELS, SIM, k=4)
    anchors = torch.tensor([1, 5, 9, 1])  # all class 0
    out = sampler.sample(anchors, LABELS[anchors], 25000, gen(0))
    assert out.shape == (4, 25000) and out.dtype == torch.int64
    drawn = LABELS[out].flatten()
    assert not (drawn == 0).any()
    # Exact support: every member of classes 1, 2, 4 and nothing else.
    assert set(out.flatten().tolist()) == members(1) | members(2) | members(4)
    p = {1: 0.8 / 1.4, 2: 0.4 / 1.4, 4: 0.2 / 1.4}
    n = drawn.numel()
    for c, pc in p.items():
        assert abs((drawn == c).sum().item() / n - pc) < 0.01
        for i in members(c):  # instance uniform within the class
            assert abs((out == i).sum().item() / n - pc / len(members(c))) < 0.01


def test_class_sampler_mixed_anchor_classes_never_same_class():
    sampler = ClassConditionedNegatives(LABELS, SIM, k=2)
    anchors = torch.arange(12)
    out = sampler.sample(anchors, LABELS, 500, gen(3))
    assert not (LABELS[out] == LABELS[:, None]).any()
    p = class_negative_distribution(SIM, k=2)
    for b in range(12):  # each row's classes lie in the support of its anchor's distribution
        assert (p[LABELS[b], LABELS[out[b]]] > 0).all()


def test_class_sampler_skips_empty_classes_and_checks_labels():
    labels = torch.tensor([0, 0, 2, 2, 4])  # classes 1 and 3 are empty
    sampler = ClassConditionedNegatives(labels, SIM, k=1)
    assert sampler.probs[0].tolist() == [0, 0, 1.0, 0, 0]  # class 1 (0.8) has no samples: next is 2
    with pytest.raises(ValueError, match="similarity matrix has 5 classes"):
        ClassConditionedNegatives(torch.tensor([0, 5]), SIM, k=1)


def test_samplers_are_deterministic_per_generator_seed():
    anchors = torch.tensor([0, 3, 6])
    feats = torch.randn(12, 4, generator=gen(9))
    for sampler in (UniformNegatives(LABELS), ClassConditionedNegatives(LABELS, SIM, k=3),
                    InstanceConditionedNegatives.from_features(feats, LABELS, k=4)):
        a = sampler.sample(anchors, LABELS[anchors], 6, gen(1))
        b = sampler.sample(anchors, LABELS[anchors], 6, gen(1))
        c = sampler.sample(anchors, LABELS[anchors], 6, gen(2))
        assert torch.equal(a, b) and not torch.equal(a, c)


def test_uniform_sampler_crd_semantics():
    sampler = UniformNegatives(LABELS)
    anchors = torch.tensor([0, 1, 6])  # classes 2, 0, 3
    out = sampler.sample(anchors, LABELS[anchors], 8, gen(0))
    for row, y in zip(out, LABELS[anchors].tolist(), strict=True):
        assert len(set(row.tolist())) == 8  # without replacement: pools have 8, 9, 11 samples
        assert set(row.tolist()) <= set(range(12)) - members(y)
    assert set(out[0].tolist()) == set(range(12)) - members(2)  # K = pool size: the whole pool
    # K above the pool: with replacement, uniform over the 8 other-class samples of class 2.
    big = sampler.sample(torch.tensor([0]), torch.tensor([2]), 40000, gen(5))
    pool = set(range(12)) - members(2)
    assert set(big.flatten().tolist()) == pool
    for i in pool:
        assert abs((big == i).float().mean().item() - 1 / 8) < 0.01


def brute_force_pools(feats: torch.Tensor, labels: torch.Tensor, k: int) -> list[list[int]]:
    f = feats.double()
    out = []
    for i in range(len(f)):
        cand = [j for j in range(len(f)) if labels[j] != labels[i]]
        cos = {j: float(f[i] @ f[j] / (f[i].norm() * f[j].norm())) for j in cand}
        out.append(sorted(cand, key=lambda j: -cos[j])[:k])
    return out


def test_instance_pools_match_brute_force_across_chunks():
    feats = torch.randn(12, 5, generator=gen(4))
    pools, sims = instance_negative_pools(feats, LABELS, k=3, chunk_size=5)  # chunks of 5, 5, 2
    assert pools.tolist() == brute_force_pools(feats, LABELS, 3)
    f = torch.nn.functional.normalize(feats.double(), dim=1)
    torch.testing.assert_close(sims.double(), (f[:, None, :] * f[pools]).sum(-1), rtol=0, atol=1e-6)
    assert not (LABELS[pools] == LABELS[:, None]).any()
    with pytest.raises(ValueError, match=r"\[1, 8\]"):
        instance_negative_pools(feats, LABELS, k=9)


def test_instance_sampler_uniform_and_similarity_weighted():
    pools = torch.tensor([[4, 2, 8], [0, 3, 7]])
    sims = torch.tensor([[0.6, 0.3, -0.2], [0.0, -0.1, -0.5]])
    uni = InstanceConditionedNegatives(pools)
    small = uni.sample(torch.tensor([0, 1]), torch.tensor([0, 0]), 3, gen(0))
    assert [sorted(r) for r in small.tolist()] == [[2, 4, 8], [0, 3, 7]]  # K = k: each pool exactly once
    big = uni.sample(torch.tensor([0]), torch.tensor([0]), 30000, gen(1))
    for i in (4, 2, 8):
        assert abs((big == i).float().mean().item() - 1 / 3) < 0.01
    weighted = InstanceConditionedNegatives(pools, sims, weighting="similarity")
    out = weighted.sample(torch.tensor([0, 1]), torch.tensor([0, 0]), 30000, gen(2))
    assert set(out[0].tolist()) == {4, 2}  # the negative similarity is clipped to weight 0
    assert abs((out[0] == 4).float().mean().item() - 2 / 3) < 0.01
    assert set(out[1].tolist()) == {0, 3, 7}  # nothing positive: uniform
    assert abs((out[1] == 7).float().mean().item() - 1 / 3) < 0.01


def test_fingerprints():
    a = ClassConditionedNegatives(LABELS, SIM, k=3).fingerprint()
    assert a == ClassConditionedNegatives(LABELS, SIM.clone(), k=3).fingerprint()
    assert a != ClassConditionedNegatives(LABELS, SIM, k=2).fingerprint()
    assert len(a) == 64 and int(a, 16) >= 0
    assert tensor_sha256(torch.zeros(2)) != tensor_sha256(torch.zeros(2, dtype=torch.float64))
    assert UniformNegatives(LABELS).fingerprint() != UniformNegatives(LABELS.flip(0)).fingerprint()
