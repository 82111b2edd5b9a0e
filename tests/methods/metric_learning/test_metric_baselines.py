"""RINCE's metric-learning baselines: triplet loss with rank margins, FastAP, two-superclass batches."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import semcl.losses.metric as metric
from semcl.data import ImageSet
from semcl.data.sampling import two_superclass_order
from semcl.engine.train import train
from semcl.losses import fastap_loss, fastap_per_query, rank_margin_triplet_loss
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.metric_learning import FastAPMethod, TripletMethod
from semcl.methods.registry import METHODS, PLANNED_METHODS, method_class
from semcl.registry.tables import get_table
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

F2C = torch.tensor([0, 0, 0, 1, 1, 2, -1])  # superclasses {0, 1, 2}, {3, 4}, {5}; class 6 has none




# --- triplet loss with rank margins ------------------------------------------------------------

def _code(a: int, b: int, labels, f2c) -> int:
    la, lb = int(labels[a]), int(labels[b])
    if la == lb:
        return 0
    ca, cb = int(f2c[la]), int(f2c[lb])
    return 1 if ca == cb and ca >= 0 else 2


def reference_triplet(z: torch.Tensor, labels, f2c, margins) -> torch.Tensor:
    """Every (a, p, n) with p != a and rank(a, p) above rank(a, n); mean over the positive hinges."""
    hinges = []
    b = len(labels)
    for a in range(b):
        for p in range(b):
            for n in range(b):
                cp, cn = _code(a, p, labels, f2c), _code(a, n, labels, f2c)
                if p == a or cp >= cn:
                    continue
                m = margins[0] if cn == 1 else margins[1]
                hinges.append(torch.clamp(torch.linalg.norm(z[a] - z[p]) - torch.linalg.norm(z[a] - z[n]) + m, min=0))
    active = [h for h in hinges if float(h.detach()) > 0]
    return torch.stack(active).sum() / len(active) if active else z.sum() * 0


def test_triplet_hand_cases_show_which_triplets_get_which_margin():
    # 1-d points: a (class 0) at 0, p (class 0) at 0.3, s (class 1, same superclass) at 0.6, n (class 5) at 1
    labels, z = torch.tensor([0, 0, 1, 5]), torch.tensor([[0.0], [0.3], [0.6], [1.0]], dtype=torch.float64)
    # triplets (anchor, pos, neg) -> margin: (a,p,s) m1, (a,p,n) m2, (a,s,n) m2, (p,a,s) m1, (p,a,n) m2, (p,s,n) m2,
    # (s,a,n) m2, (s,p,n) m2; the distance parts sum to -0.3 - 0.7 - 0.4 + 0 - 0.4 - 0.4 + 0.2 - 0.1 = -2.1
    got = rank_margin_triplet_loss(z, labels, F2C, (0.5, 1.0))
    assert float(got) == pytest.approx((2 * 0.5 + 6 * 1.0 - 2.1) / 8)  # 0.6125, all 8 triplets active
    # m1 = 0.2, m2 = 0.5: (a,p,s) = -0.1 and (a,p,n) = -0.2 drop out; the other six sum to 1.6
    assert float(rank_margin_triplet_loss(z, labels, F2C, (0.2, 0.5))) == pytest.approx(1.6 / 6)
    # swapped margins: (a,p,s) 0.7, (p,a,s) 1.0; of the m2 = 0.5 triplets (a,s,n) 0.1, (p,a,n) 0.1, (p,s,n) 0.1,
    # (s,a,n) 0.7, (s,p,n) 0.4 are active and (a,p,n) = -0.2 is not
    assert float(rank_margin_triplet_loss(z, labels, F2C, (1.0, 0.5))) == pytest.approx(3.1 / 7)
    # the negative far away: only the two same-superclass triplets (a,p,s) 0.2 and (p,a,s) 0.5 stay active
    far = torch.tensor([[0.0], [0.3], [0.6], [3.0]], dtype=torch.float64)
    assert float(rank_margin_triplet_loss(far, labels, F2C, (0.5, 1.0))) == pytest.approx(0.7 / 2)


def test_triplet_without_active_triplets_is_zero_with_a_graph():
    z = torch.tensor([[0.0], [0.1], [5.0]], requires_grad=True)
    loss = rank_margin_triplet_loss(z, torch.tensor([0, 0, 3]), F2C)
    assert float(loss.detach()) == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(z.grad, torch.zeros_like(z))
    # one image per class and no shared superclass: no valid triplet at all
    assert float(rank_margin_triplet_loss(torch.randn(3, 4), torch.tensor([0, 3, 5]), F2C)) == 0.0


@pytest.mark.parametrize("chunk_elems", [1 << 24, 40])  # one chunk; 40 // 14^2 -> one anchor per chunk
def test_triplet_matches_float64_triple_loop_and_its_gradient(monkeypatch, chunk_elems):
    monkeypatch.setattr(metric, "_CHUNK_ELEMS", chunk_elems)
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 0, 3, 1])
    x = torch.randn(14, 5, generator=g, dtype=torch.float64)
    margins = (0.5, 1.0)
    for scale in (0.3, 1.0):  # small scale: many active triplets; unit sphere: the method's setting
        z0 = F.normalize(x, dim=1) * scale
        z = z0.clone().requires_grad_(True)
        loss = rank_margin_triplet_loss(z, labels, F2C, margins)
        loss.backward()
        zr = z0.clone().requires_grad_(True)
        ref = reference_triplet(zr, labels, F2C, margins)
        ref.backward()
        assert float(ref.detach()) > 0
        torch.testing.assert_close(loss, ref, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(z.grad, zr.grad, rtol=1e-9, atol=1e-12)


def test_triplet_memory_stays_chunked_at_batch_512(monkeypatch):
    seen = []
    real_sum = torch.Tensor.sum

    def spy(t, *args, **kwargs):
        seen.append(t.numel())
        return real_sum(t, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "sum", spy)
    g = torch.Generator().manual_seed(1)
    z = F.normalize(torch.randn(512, 8, generator=g), dim=1)
    loss = rank_margin_triplet_loss(z, torch.randint(0, 7, (512,), generator=g), F2C)
    assert math.isfinite(float(loss))
    assert max(seen) <= metric._CHUNK_ELEMS < 512 ** 3  # never a B^3 tensor


# --- FastAP ------------------------------------------------------------------------------------

def reference_fastap(z: torch.Tensor, labels: torch.Tensor, num_bins: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Cakir et al. 2019, Eq. 9 with triangular pulses, written as loops: (loss, FastAP of each query with positives)."""
    b = len(labels)
    delta = 4.0 / num_bins
    centres = [k * delta for k in range(num_bins + 1)]
    aps = []
    for q in range(b):
        d = {j: ((z[q] - z[j]) ** 2).sum() for j in range(b) if j != q}  # squared Euclidean distance
        rel = [j for j in d if int(labels[j]) == int(labels[q])]
        if not rel:
            continue
        h_pos = [sum(torch.clamp(1 - (d[j] - c).abs() / delta, min=0) for j in rel) for c in centres]
        h_all = [sum(torch.clamp(1 - (d[j] - c).abs() / delta, min=0) for j in d) for c in centres]
        ap, cum_pos, cum_all = 0, 0, 0
        for k in range(len(centres)):
            cum_pos, cum_all = cum_pos + h_pos[k], cum_all + h_all[k]
            if float(cum_all.detach()) > 0:
                ap = ap + h_pos[k] * cum_pos / cum_all
        aps.append(ap / len(rel))
    return 1 - torch.stack(aps).mean(), aps


@pytest.mark.parametrize("num_bins", [1, 5, 10])
def test_fastap_matches_the_papers_formula_and_its_gradient(num_bins):
    g = torch.Generator().manual_seed(2)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3, 0, 4])  # classes 2 and 4 have no relevant item
    x0 = torch.randn(10, 3, generator=g, dtype=torch.float64)
    # gradients w.r.t. the features before normalisation (as in the method): the loss's 2 - 2 z.z' and the
    # paper's |z_q - z_j|^2 agree on the sphere, their gradients only off it
    x, xr = x0.clone().requires_grad_(True), x0.clone().requires_grad_(True)
    loss = fastap_loss(F.normalize(x, dim=1), labels, num_bins)
    ref, ref_aps = reference_fastap(F.normalize(xr, dim=1), labels, num_bins)
    torch.testing.assert_close(loss, ref, rtol=1e-10, atol=1e-12)
    ap, has_pos = fastap_per_query(F.normalize(x0, dim=1), labels, num_bins)
    assert has_pos.tolist() == [True] * 5 + [False, True, True, True, False]
    torch.testing.assert_close(ap[has_pos], torch.stack(ref_aps).detach(), rtol=1e-10, atol=1e-12)
    loss.backward()
    ref.backward()
    assert float(xr.grad.abs().sum()) > 0
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-8, atol=1e-12)


def _at_squared_distances(d2: list[float]) -> torch.Tensor:
    """Unit vectors in 2-d: a query (1, 0) followed by points at the given squared distances from it."""
    cos = torch.tensor([1.0] + [1 - v / 2 for v in d2], dtype=torch.float64)
    return torch.stack([cos, (1 - cos ** 2).clamp_min(0).sqrt()], 1)


def test_fastap_hand_cases():
    # relevant at 0, irrelevant at 0.8, relevant at 1.6, each on a bin centre (5 bins: width 0.8):
    # h+ = [1, 0, 1], h = [1, 1, 1], H+ = [1, 1, 2], H = [1, 2, 3] -> (1 + 0 + 2/3) / 2 = 5/6, the exact AP
    z = _at_squared_distances([0.0, 0.8, 1.6])
    ap, _ = fastap_per_query(z, torch.tensor([0, 0, 1, 0]), 5)
    assert float(ap[0]) == pytest.approx(5 / 6)
    # perfect ranking with a gap wider than a bin: relevant items in bins 0-1, irrelevant ones from bin 3 on -> 1
    z = _at_squared_distances([0.1, 0.5, 2.5, 3.0, 4.0])
    ap, _ = fastap_per_query(z, torch.tensor([0, 0, 0, 1, 1, 1]), 5)
    assert float(ap[0]) == pytest.approx(1.0)
    # interleaved at 0.1 (rel), 0.2, 0.3 (rel), 0.4: exact AP (1 + 2/3) / 2 = 5/6. With 5 bins all four share
    # bins 0 and 1: h+ = [1.5, 0.5], h = [2.75, 1.25] -> (1.5 * 1.5 / 2.75 + 0.5 * 2 / 4) / 2 = 0.5341;
    # with 400 bins (width 0.01) every item sits on its own centre and FastAP is the exact AP
    z = _at_squared_distances([0.1, 0.2, 0.3, 0.4])
    labels = torch.tensor([0, 0, 1, 0, 1])
    assert float(fastap_per_query(z, labels, 5)[0][0]) == pytest.approx((1.5 * 1.5 / 2.75 + 0.5 * 2 / 4) / 2)
    assert float(fastap_per_query(z, labels, 400)[0][0]) == pytest.approx(5 / 6, abs=1e-9)


def test_fastap_without_relevant_items_is_zero_with_a_graph():
    z = F.normalize(torch.randn(3, 4), dim=1).requires_grad_(True)
    loss = fastap_loss(z, torch.tensor([0, 1, 2]))
    assert float(loss.detach()) == 0.0
    loss.backward()
    assert torch.equal(z.grad, torch.zeros_like(z))


# --- two-superclass batches --------------------------------------------------------------------

def _sampler_labels() -> tuple[torch.Tensor, torch.Tensor]:
    # superclass 0: classes 0-2 (40 images each), 1: classes 3-4 (30 each), 2: class 5 (7 images, below half a batch),
    # class 6 has no superclass (10 images, never drawn)
    counts = [40, 40, 40, 30, 30, 7, 10]
    labels = torch.cat([torch.full((c,), k) for k, c in enumerate(counts)])
    return labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))], F2C


def test_two_superclass_blocks():
    labels, f2c = _sampler_labels()
    n, bs = len(labels), 24  # 197 images: 8 full blocks and a cut-short ninth
    order = two_superclass_order(labels, f2c, bs, torch.Generator().manual_seed(4))
    assert order.shape == (n,) and order.dtype == torch.long
    assert int(order.min()) >= 0 and int(order.max()) < n
    coarse = f2c[labels[order]]
    assert bool((coarse >= 0).all())  # class 6 (no superclass) never drawn
    pairs = set()
    for s in range(0, n - n % bs, bs):
        block = coarse[s:s + bs]
        supers, sizes = torch.unique(block, return_counts=True)
        assert len(supers) == 2 and sorted(sizes.tolist()) == [12, 12], block
        pairs.add(tuple(supers.tolist()))
        if 2 not in supers:  # both superclasses have >= 12 images: no image twice in a block
            assert len(torch.unique(order[s:s + bs])) == bs
    assert len(pairs) > 1  # superclass pairs vary from block to block
    assert len(torch.unique(coarse[n - n % bs:])) <= 2
    again = two_superclass_order(labels, f2c, bs, torch.Generator().manual_seed(4))
    other = two_superclass_order(labels, f2c, bs, torch.Generator().manual_seed(5))
    assert torch.equal(order, again) and not torch.equal(order, other)


def test_two_superclass_odd_batches_draw_superclasses_and_images_uniformly():
    # superclass 0: 3 x 1000 images, 1: 2 x 1500, 2: 600; class 6 (no superclass) 100: 1340 blocks of 5
    counts = [1000, 1000, 1000, 1500, 1500, 600, 100]
    labels = torch.cat([torch.full((c,), k) for k, c in enumerate(counts)])
    order = two_superclass_order(labels, F2C, 5, torch.Generator().manual_seed(7))
    coarse = F2C[labels[order]].view(-1, 5)
    for row in coarse:
        _, sizes = torch.unique(row, return_counts=True)
        assert sorted(sizes.tolist()) == [2, 3]  # ceil / floor of 5 / 2
    # each superclass is one of a block's two in 2/3 of the blocks (3 superclasses, 2 drawn without replacement,
    # not in proportion to their size); binomial std ~0.013
    share = torch.stack([(coarse == c).any(1).double().mean() for c in range(3)])
    assert torch.allclose(share, torch.full((3,), 2 / 3, dtype=torch.float64), atol=0.05), share
    # within superclass 1 (classes 3 and 4, 1500 images each) the two classes are hit about equally often (std ~0.011)
    drawn = labels[order].view(-1, 5)[coarse == 1]
    assert abs(float((drawn == 3).double().mean()) - 0.5) < 0.05


def test_one_superclass_and_keyword_errors():
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    order = two_superclass_order(labels, torch.tensor([0, 0, 0]), 4, torch.Generator().manual_seed(0))
    assert order.shape == (6,) and sorted(order[:4].tolist()) == sorted(set(order[:4].tolist()))
    with pytest.raises(ValueError, match="no training image has a known superclass"):
        two_superclass_order(labels, torch.tensor([-1, -1, -1]), 4, torch.Generator())


def test_fastap_batches_are_two_superclass_blocks_and_triplet_keeps_instance_order():
    labels = torch.arange(7).repeat(4)
    fastap = method_class("fastap")(_cfg("fastap"), DataInfo(7, 1, F2C))
    triplet = method_class("triplet")(_cfg("triplet"), DataInfo(7, 1, F2C))
    got = fastap.epoch_order(labels, 7, torch.Generator().manual_seed(1), 4)
    assert torch.equal(got, two_superclass_order(labels, F2C, 4, torch.Generator().manual_seed(1)))
    plain = triplet.epoch_order(labels, 7, torch.Generator().manual_seed(1), 4)
    assert torch.equal(plain, torch.randperm(28, generator=torch.Generator().manual_seed(1)))


# --- methods, schemas, registry ----------------------------------------------------------------

def _cfg(name: str, **method):
    return build_config({"method": {"name": name, **method}, "model": {"backbone": "resnet_tiny", "head_hidden": 16,
                                                                      "head_dim": 8},
                         "data": {"name": "fashion_mnist", "augment": "crop_flip"},
                         "optim": {"batch_size": 8, "warmup_epochs": 0, "lr": 0.1}, "schedule": {"epochs": 1}},
                        where="test")


def test_schemas_registry_and_rows():
    assert METHODS["triplet"].schema is TripletMethod and METHODS["fastap"].schema is FastAPMethod
    assert "triplet" not in PLANNED_METHODS and "fastap" not in PLANNED_METHODS
    assert build_config({"method": {"name": "triplet"}}, where="x").method.margins == [0.5, 1.0]
    assert build_config({"method": {"name": "fastap"}}, where="x").method.num_bins == 5
    assert METHODS["triplet"].losses == ("semcl.losses.metric:rank_margin_triplet_loss",)
    assert METHODS["fastap"].losses == ("semcl.losses.metric:fastap_loss",)
    rows = {r.label: r for r in get_table("rince/tab2").rows}
    assert rows["Triplet"].method == "triplet" and rows["Triplet"].overrides["optim.lr"] == 0.75
    assert rows["FastAP"].method == "fastap" and rows["FastAP"].overrides["optim.lr"] == 0.1


@pytest.mark.parametrize("name, loss_fn", [("triplet", lambda z, y: rank_margin_triplet_loss(z, y, F2C, (0.5, 1.0))),
                                           ("fastap", lambda z, y: fastap_loss(z, y, 5))])
def test_training_step_is_the_loss_on_the_normalised_projection(name, loss_fn):
    torch.manual_seed(0)
    m = method_class(name)(_cfg(name), DataInfo(7, 1, F2C))
    assert m.num_views == 1 and not hasattr(m, "bank")
    x = torch.randn(10, 1, 12, 12, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([0, 0, 1, 2, 3, 3, 4, 5, 0, 1])
    loss = run_step(m, Batch.of([x], labels))["loss"]
    z = m.head(m.backbone(x))
    torch.testing.assert_close(z.norm(dim=1), torch.ones(10))
    assert float(loss.detach()) > 0
    torch.testing.assert_close(loss, loss_fn(z, labels), rtol=1e-5, atol=1e-6)
    loss.backward()
    assert any(float(p.grad.abs().sum()) > 0 for p in m.backbone.parameters() if p.grad is not None)


@pytest.mark.parametrize("name, method, info, match", [
    ("triplet", {"margins": [0.5]}, DataInfo(7, 1, F2C), "margins"),
    ("triplet", {}, DataInfo(7, 1, None), "superclass"),
    ("fastap", {"num_bins": 0}, DataInfo(7, 1, F2C), "num_bins"),
    ("fastap", {}, DataInfo(7, 1, None), "superclass"),
])
def test_rejects_bad_settings(name, method, info, match):
    with pytest.raises(ValueError, match=match):
        method_class(name)(_cfg(name, **method), info)


def test_engine_feeds_fastap_two_superclass_batches(tmp_path):
    cfg = _cfg("fastap")
    g = torch.Generator().manual_seed(5)
    labels = torch.arange(6).repeat(5)  # 30 images of classes 0-5 (3 superclasses): 3 batches of 8 per epoch
    data = ImageSet("fashion_mnist", torch.randint(0, 256, (30, 1, 12, 12), dtype=torch.uint8, generator=g), labels,
                    [str(k) for k in range(7)], coarse_of=F2C)
    torch.manual_seed(0)
    m = method_class("fastap")(cfg, DataInfo(7, 1, F2C))
    before, batches, real_step = copy.deepcopy(m), [], m.loss

    def spy(batch):
        batches.append(batch.labels.clone())
        return real_step(batch)

    m.loss = spy
    history = train(m, data, cfg, seed=0, ckpt=tmp_path / "last.pt")
    assert len(history) == 1 and len(batches) == 3 and math.isfinite(history[0]["loss"])
    for y in batches:
        assert len(y) == 8 and len(torch.unique(F2C[y])) == 2
    assert not torch.equal(m.head.net[0].weight, before.head.net[0].weight)
