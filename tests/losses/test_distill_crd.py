"""CRD: NCE / InfoNCE objectives, memory banks, fixed Z, state_dict, and the uniform negative sampler."""

import math

import pytest
import torch

from semcl.losses.distill import CRDLoss, Embed, nce_loss, sample_uniform_negatives

F64 = torch.float64


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def dot(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def unit(a):
    n = math.sqrt(dot(a, a))
    return [x / n for x in a]


def embed_ref(linear: torch.nn.Linear, x: torch.Tensor) -> list[list[float]]:
    w, b = linear.weight.tolist(), linear.bias.tolist()
    return [unit([dot(w[o], row) + b[o] for o in range(len(w))]) for row in x.tolist()]


def nce_ref(scores: list[list[float]], n_data: int, eps: float = 1e-7) -> float:
    """−(1/B) Σ_b [log(x_0/(x_0 + K/N + ε)) + Σ_k log((K/N)/(x_k + K/N + ε))]."""
    total = 0.0
    for row in scores:
        noise = (len(row) - 1) / n_data
        total += math.log(row[0] / (row[0] + noise + eps))
        total += sum(math.log(noise / (x + noise + eps)) for x in row[1:])
    return -total / len(scores)


def side_exps(v, memory, idx, T):
    return [[math.exp(dot(v[b], memory[j]) / T) for j in idx[b]] for b in range(len(v))]


def test_nce_loss_matches_reference():
    scores = rand(3, 5, seed=1).abs() + 0.1
    assert nce_loss(scores, 40).item() == pytest.approx(nce_ref(scores.tolist(), 40), rel=1e-12)


def test_embed_is_normalised_linear_map():
    emb = Embed(4, 3).double()
    x = rand(2, 2, 2, seed=2)  # flattened to 4
    torch.testing.assert_close(emb(x), torch.tensor(embed_ref(emb.linear, x.flatten(1)), dtype=F64))


def make_crd(seed: int, objective: str = "nce", T: float = 0.2) -> CRDLoss:
    torch.manual_seed(seed)
    return CRDLoss(3, 4, n_data=8, dim=3, T=T, objective=objective,
                   generator=torch.Generator().manual_seed(seed)).double()


BATCHES = [
    (rand(2, 3, seed=3), rand(2, 4, seed=4), torch.tensor([1, 5]), torch.tensor([[0, 3, 7], [2, 2, 6]])),
    (rand(2, 3, seed=5), rand(2, 4, seed=6), torch.tensor([5, 0]), torch.tensor([[1, 4, 7], [3, 6, 1]])),
]


def test_crd_step_z_fixed_from_first_batch_and_memory_momentum():
    crd, T, n, m = make_crd(0), 0.2, 8, 0.5
    mem_s, mem_t = crd.memory.memory_s.tolist(), crd.memory.memory_t.tolist()
    z_s = z_t = None
    for f_s, f_t, index, neg in BATCHES:
        v_s, v_t = embed_ref(crd.embed_s.linear, f_s), embed_ref(crd.embed_t.linear, f_t)
        idx = [[i] + row for i, row in zip(index.tolist(), neg.tolist(), strict=True)]
        e_s = side_exps(v_s, mem_t, idx, T)  # student anchor against the teacher bank
        e_t = side_exps(v_t, mem_s, idx, T)
        if z_s is None:  # Z = N · mean over the first batch's B·(K+1) scores, then fixed
            z_s = n * sum(map(sum, e_s)) / (len(e_s) * len(e_s[0]))
            z_t = n * sum(map(sum, e_t)) / (len(e_t) * len(e_t[0]))
        ref = nce_ref([[x / z_s for x in r] for r in e_s], n) + nce_ref([[x / z_t for x in r] for r in e_t], n)
        assert crd(f_s, f_t, index, neg).item() == pytest.approx(ref, rel=1e-10)
        assert crd.z_s.item() == pytest.approx(z_s, rel=1e-12) and crd.z_t.item() == pytest.approx(z_t, rel=1e-12)
        for b, i in enumerate(index.tolist()):
            mem_s[i] = unit([m * a + (1 - m) * c for a, c in zip(mem_s[i], v_s[b], strict=True)])
            mem_t[i] = unit([m * a + (1 - m) * c for a, c in zip(mem_t[i], v_t[b], strict=True)])
        torch.testing.assert_close(crd.memory.memory_s, torch.tensor(mem_s, dtype=F64))
        torch.testing.assert_close(crd.memory.memory_t, torch.tensor(mem_t, dtype=F64))


def test_crd_infonce_variant_matches_softmax_reference():
    crd, T = make_crd(1, objective="infonce"), 0.2
    f_s, f_t, index, neg = BATCHES[0]
    v_s, v_t = embed_ref(crd.embed_s.linear, f_s), embed_ref(crd.embed_t.linear, f_t)
    idx = [[i] + row for i, row in zip(index.tolist(), neg.tolist(), strict=True)]
    ref = 0.0
    for e in (side_exps(v_s, crd.memory.memory_t.tolist(), idx, T), side_exps(v_t, crd.memory.memory_s.tolist(), idx, T)):
        ref += sum(-math.log(row[0] / sum(row)) for row in e) / len(e)
    assert crd(f_s, f_t, index, neg).item() == pytest.approx(ref, rel=1e-10)


def test_crd_state_dict_restores_banks_and_z_exactly():
    a, b = make_crd(2), make_crd(3)
    a(*BATCHES[0])
    b.load_state_dict(a.state_dict())
    assert {"memory.memory_s", "memory.memory_t", "z_s", "z_t"} <= set(a.state_dict())
    assert a(*BATCHES[1]).item() == b(*BATCHES[1]).item()
    assert torch.equal(a.memory.memory_s, b.memory.memory_s) and torch.equal(a.memory.memory_t, b.memory.memory_t)


def test_crd_rejects_bad_negative_shape():
    f_s, f_t, index, _ = BATCHES[0]
    with pytest.raises(ValueError, match="negatives"):
        make_crd(4)(f_s, f_t, index, torch.tensor([1, 2, 3]))


LABELS = torch.tensor([0, 0, 1, 1, 1, 2, 2, 3, 3, 3])


def test_uniform_negatives_exclude_the_anchor_class_without_replacement():
    index = torch.tensor([0, 4, 9])
    neg = sample_uniform_negatives(index, 10, 5, torch.Generator().manual_seed(0), labels=LABELS)
    assert neg.shape == (3, 5)
    for i, row in zip(index.tolist(), neg.tolist(), strict=True):
        assert all(LABELS[j] != LABELS[i] for j in row)
        assert len(set(row)) == 5  # pools of 7-8 other-class samples: no repeats
    again = sample_uniform_negatives(index, 10, 5, torch.Generator().manual_seed(0), labels=LABELS)
    assert torch.equal(neg, again)


def test_uniform_negatives_cover_the_pool_and_replace_only_when_needed():
    index = torch.tensor([2])
    neg = sample_uniform_negatives(index, 10, 50, torch.Generator().manual_seed(1), labels=LABELS)
    assert set(neg.flatten().tolist()) == {0, 1, 5, 6, 7, 8, 9}  # K > pool of 7: with replacement, full support
    no_lab = sample_uniform_negatives(torch.tensor([3, 3]), 10, 9, torch.Generator().manual_seed(2))
    assert all(sorted(r) == [0, 1, 2, 4, 5, 6, 7, 8, 9] for r in no_lab.tolist())  # all but the anchor itself
    with_self = sample_uniform_negatives(torch.tensor([3]), 10, 10, torch.Generator().manual_seed(2),
                                         exclude_self=False)
    assert sorted(with_self.flatten().tolist()) == list(range(10))
