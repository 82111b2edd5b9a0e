"""SP, CC, RKD and PKT against loop references written from the papers' formulas (float64)."""

import math

import pytest
import torch

from semcl.losses.distill import cc_loss, pkt_loss, rkd_loss, sp_loss

F64 = torch.float64


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def rows(x):
    return x.flatten(1).tolist()


def dot(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def unit(a):
    n = math.sqrt(dot(a, a))
    return [x / n for x in a] if n > 0 else [0.0 for _ in a]


def huber(x):
    return 0.5 * x * x if abs(x) < 1 else abs(x) - 0.5


def test_sp_matches_row_normalised_gram_reference():
    s, t = rand(4, 2, 2, 2, seed=1), rand(4, 5, seed=2)
    n = 4

    def gram(q):
        g = [[dot(q[i], q[j]) for j in range(n)] for i in range(n)]
        return [[v / math.sqrt(sum(w * w for w in row)) for v in row] for row in g]

    gs, gt = gram(rows(s)), gram(rows(t))
    ref = sum((gt[i][j] - gs[i][j]) ** 2 for i in range(n) for j in range(n)) / n**2
    assert sp_loss(s, t).item() == pytest.approx(ref, rel=1e-12)


def reference_cc(s, t, gamma, order):
    n = len(s)

    def psi(f):
        f = [unit(v) for v in f]
        return [[sum(math.exp(-2 * gamma) * (2 * gamma) ** p / math.factorial(p) * dot(f[i], f[j]) ** p
                     for p in range(order + 1)) for j in range(n)] for i in range(n)]

    ps, pt = psi(s), psi(t)
    return sum((pt[i][j] - ps[i][j]) ** 2 for i in range(n) for j in range(n)) / n**2


def test_cc_paper_form_matches_taylor_reference():
    s, t = rand(5, 3, seed=3), rand(5, 3, seed=4)
    assert cc_loss(s, t).item() == pytest.approx(reference_cc(rows(s), rows(t), 0.4, 2), rel=1e-12)


def test_cc_high_order_taylor_converges_to_the_gaussian_rbf():
    s, t = rand(4, 3, seed=5), rand(4, 3, seed=6)
    n = 4

    def rbf(f):
        f = [unit(v) for v in f]
        return [[math.exp(-0.4 * sum((a - b) ** 2 for a, b in zip(f[i], f[j], strict=True))) for j in range(n)]
                for i in range(n)]

    ks, kt = rbf(rows(s)), rbf(rows(t))
    exact = sum((kt[i][j] - ks[i][j]) ** 2 for i in range(n) for j in range(n)) / n**2
    assert cc_loss(s, t, order=20).item() == pytest.approx(exact, rel=1e-10)


def test_cc_repdistiller_variant_is_consecutive_delta_product():
    s, t = rand(4, 3, seed=7), rand(4, 3, seed=8)
    d = [[abs(a - b) for a, b in zip(x, y, strict=True)] for x, y in zip(rows(s), rows(t), strict=True)]
    ref = sum(dot(d[i], d[i + 1]) for i in range(3)) / 3
    assert cc_loss(s, t, variant="repdistiller").item() == pytest.approx(ref, rel=1e-12)


def reference_rkd(s, t, w_d=25.0, w_a=50.0):
    n = len(s)

    def dist(f):
        d = [[math.sqrt(sum((a - b) ** 2 for a, b in zip(f[i], f[j], strict=True))) for j in range(n)] for i in range(n)]
        mu = sum(d[i][j] for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
        return [[v / mu for v in row] for row in d]

    def angle(f):  # vertex i, arms to j and k; a degenerate arm (j = i) is the zero vector
        e = [[unit([a - b for a, b in zip(f[j], f[i], strict=True)]) for j in range(n)] for i in range(n)]
        return [[[dot(e[i][j], e[i][k]) for k in range(n)] for j in range(n)] for i in range(n)]

    ds, dt = dist(s), dist(t)
    a_s, a_t = angle(s), angle(t)
    loss_d = sum(huber(ds[i][j] - dt[i][j]) for i in range(n) for j in range(n)) / n**2
    loss_a = sum(huber(a_s[i][j][k] - a_t[i][j][k]) for i in range(n) for j in range(n) for k in range(n)) / n**3
    return w_d * loss_d + w_a * loss_a


def test_rkd_matches_distance_and_angle_reference():
    s, t = rand(5, 3, seed=9), rand(5, 4, seed=10) * 3
    assert rkd_loss(s, t).item() == pytest.approx(reference_rkd(rows(s), rows(t)), rel=1e-9)
    # the distance term is scale-free and the angle term too: a scaled copy costs nothing
    assert rkd_loss(2.5 * t, t).item() == pytest.approx(0.0, abs=1e-9)


def test_rkd_does_not_backpropagate_into_the_teacher():
    s, t = rand(4, 3, seed=11).requires_grad_(), rand(4, 3, seed=12).requires_grad_()
    rkd_loss(s, t).backward()
    assert t.grad is None and s.grad is not None and s.grad.abs().sum() > 0


def reference_pkt(s, t, keep_diagonal=False, eps=0.0):
    n = len(s)

    def cond(f):
        f = [[x / (math.sqrt(dot(v, v)) + eps) for x in v] for v in f]
        k = [[(dot(f[i], f[j]) + 1) / 2 if (keep_diagonal or i != j) else 0.0 for j in range(n)] for i in range(n)]
        return [[k[i][j] / sum(k[i]) for j in range(n)] for i in range(n)]

    ps, pt = cond(s), cond(t)
    pairs = [(i, j) for i in range(n) for j in range(n) if keep_diagonal or i != j]
    return sum(pt[i][j] * math.log((pt[i][j] + eps) / (ps[i][j] + eps)) for i, j in pairs) / n**2


def test_pkt_paper_and_repdistiller_variants_match_reference():
    s, t = rand(5, 3, seed=13), rand(5, 6, seed=14)
    assert pkt_loss(s, t).item() == pytest.approx(reference_pkt(rows(s), rows(t)), rel=1e-12)
    ref_code = reference_pkt(rows(s), rows(t), keep_diagonal=True, eps=1e-7)
    assert pkt_loss(s, t, variant="repdistiller").item() == pytest.approx(ref_code, rel=1e-12)
    assert pkt_loss(t, t).item() == pytest.approx(0.0, abs=1e-14)


def test_relational_losses_reject_bad_input():
    with pytest.raises(ValueError, match="cc_loss"):
        cc_loss(rand(3, 2), rand(3, 4))
    with pytest.raises(ValueError, match="pkt_loss"):
        pkt_loss(rand(3, 2), rand(3, 2), variant="nope")
    with pytest.raises(ValueError, match="sp_loss"):
        sp_loss(rand(3, 2), rand(4, 2))
