"""RINCE's "Hierarchical triplet" baseline (Ge et al. 2018 with the ground-truth superclasses): the loss, the
violate margins from class statistics, anchor-neighbour batches, the training step and bit-exact resume."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
import torch.nn.functional as F

import semcl.engine.checkpointer as checkpointer_mod
import semcl.engine.train as train_mod
from semcl.data import ImageSet
from semcl.data.sampling import anchor_neighbour_order
from semcl.losses import hierarchical_triplet_loss
from semcl.losses.hierarchical_triplet import class_statistics, nearest_classes, violate_margins
from semcl.methods.base import Batch, DataInfo, Method, run_step
from semcl.methods.registry import METHODS, PLANNED_METHODS, method_class
from semcl.registry.tables import get_table
from semcl.run_config import build_config
from semcl.runtime import interrupt

F2C = torch.tensor([0, 0, 0, 1, 1, 2])  # 6 classes: superclass 0 of 3, 1 of 2, class 5 alone
L_PRIME, C, T = 2, 3, 2  # batch 2 + 2 * 3 + 2 = 10
DIM = 4


pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _cfg(batch_size: int = L_PRIME + L_PRIME * C + T, **method):
    tree = {"method": {"name": "hierarchical_triplet", "l_prime": L_PRIME, "c": C, "t": T, **method},
            "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": DIM},
            "optim": {"batch_size": batch_size}}
    return build_config(tree, where="test")


def _method(seed: int = 0, **method):
    torch.manual_seed(seed)
    return method_class("hierarchical_triplet")(_cfg(**method), DataInfo(6, 1, F2C))


def _brute_force_loss(z, labels, margins, squared):
    """1 / (2 Z) Σ over every (a, p, n), y_p = y_a, p != a, y_n != y_a, written as a triple loop in float64."""
    total, count = z.new_zeros(()), 0
    for a, p, n in itertools.product(range(len(labels)), repeat=3):
        if a != p and labels[a] == labels[p] and labels[n] != labels[a]:
            d_ap, d_an = ((z[a] - z[p]) ** 2).sum(), ((z[a] - z[n]) ** 2).sum()
            if not squared:
                d_ap, d_an = d_ap.sqrt(), d_an.sqrt()
            total = total + torch.relu(d_ap - d_an + margins[a, n])
            count += 1
    return total / (2 * count)


def test_schema_registry_and_table_profiles():
    assert "hierarchical_triplet" in METHODS and "hierarchical_triplet" not in PLANNED_METHODS
    m = build_config({"method": {"name": "hierarchical_triplet"}}, where="x").method
    assert (m.l_prime, m.c, m.t, m.beta, m.squared) == (30, 10, 182, 0.1, False)
    assert m.l_prime + m.l_prime * m.c + m.t == 512  # the paper's batch
    cls = method_class("hierarchical_triplet")
    assert cls.num_views == 1 and cls.epoch_order is not Method.epoch_order  # its own batches
    assert METHODS["hierarchical_triplet"].losses == ("semcl.losses.hierarchical_triplet:hierarchical_triplet_loss",)
    table = get_table("rince/tab2")
    row = table.row("Hierarchical triplet")
    for profile in ("paper", "mini", "smoke"):  # every profile's batch is an anchor-neighbour batch
        cfg = table.resolve(row, profile)
        mm = cfg.method
        assert mm.l_prime + mm.l_prime * mm.c + mm.t == cfg.optim.batch_size, profile
    assert table.resolve(row, "paper").optim.lr == 0.75


@pytest.mark.parametrize("squared", [False, True])
def test_loss_matches_a_brute_force_triple_loop(squared):
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 0, 3, 2, 2, 4])  # class 4 has one image: an anchor with no positive
    z = F.normalize(torch.randn(len(labels), 5, generator=g, dtype=torch.float64), dim=1).requires_grad_()
    margins = torch.rand(len(labels), len(labels), generator=g, dtype=torch.float64) * 1.5 - 0.2  # hand-set
    loss = hierarchical_triplet_loss(z, labels, margins, squared=squared)
    ref = _brute_force_loss(z, labels, margins, squared)
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-14)
    assert 0 < float(ref.detach())  # the margins leave some triplets active ...
    (grad,) = torch.autograd.grad(loss, z)
    (grad_ref,) = torch.autograd.grad(_brute_force_loss(z, labels, margins, squared), z)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-10, atol=1e-12)
    # ... and large margins make every triplet active: the loss is then linear in the distances
    big = torch.full_like(margins, 5.0)
    torch.testing.assert_close(hierarchical_triplet_loss(z, labels, big, squared=squared),
                               _brute_force_loss(z, labels, big, squared), rtol=1e-12, atol=1e-14)


def test_loss_without_triplets_is_zero_with_a_gradient():
    z = F.normalize(torch.randn(3, 4), dim=1).requires_grad_()
    loss = hierarchical_triplet_loss(z, torch.tensor([0, 1, 2]), torch.ones(3, 3))
    assert float(loss.detach()) == 0.0
    loss.backward()
    assert torch.equal(z.grad, torch.zeros_like(z))


def _hand_case():
    """3 classes on the unit circle; classes 0, 1 in superclass 0, class 2 in superclass 1."""
    points = {0: [(1.0, 0.0), (0.0, 1.0)], 1: [(-1.0, 0.0), (-1.0, 0.0)], 2: [(0.0, -1.0)]}
    z = torch.tensor([p for k in range(3) for p in points[k]], dtype=torch.float64)
    labels = torch.tensor([k for k in range(3) for _ in points[k]])
    return z, labels, torch.tensor([0, 0, 1])


def test_margins_on_a_hand_case():
    z, labels, f2c = _hand_case()
    stats = class_statistics(F.one_hot(labels).double().T @ z, torch.bincount(labels), f2c)
    # class means (.5, .5), (-1, 0), (0, -1): d(p, q) = 2 - 2 mu_p . mu_q; s = n / (n - 1) (2 - 2 |mu|^2), 0 for n < 2
    torch.testing.assert_close(stats.distance, torch.tensor([[1.0, 3, 3], [3, 0, 2], [3, 2, 0]], dtype=torch.float64))
    torch.testing.assert_close(stats.intra, torch.tensor([2.0, 0.0, 0.0], dtype=torch.float64))
    # d_1 over (0, 1), (1, 0); d_2 over (0, 2), (2, 0), (1, 2), (2, 1)
    torch.testing.assert_close(stats.thresholds, torch.tensor([3.0, 2.5], dtype=torch.float64))
    assert nearest_classes(stats.distance, stats.valid).tolist() == [1, 2, 1]  # class 0: tie 1 / 2 -> lower index
    margins = violate_margins(torch.tensor([0, 1, 2]), f2c, stats.thresholds, stats.intra, beta=0.1)
    # alpha[a, n] = beta + d_H - s_a: H = 1 (d_1 = 3) for the siblings 0 / 1, else H = 2 (d_2 = 2.5)
    expected = torch.tensor([[0.0, 0.1 + 3 - 2, 0.1 + 2.5 - 2],
                             [0.1 + 3 - 0, 0.0, 0.1 + 2.5 - 0],
                             [0.1 + 2.5 - 0, 0.1 + 2.5 - 0, 0.0]], dtype=torch.float64)
    off = ~torch.eye(3, dtype=torch.bool)
    torch.testing.assert_close(margins[off], expected[off])


def test_statistics_equal_the_pairwise_definitions():
    """d(p, q) = mean ||r_i - r_j||^2 over i in p, j in q; s_y = mean over ordered pairs i != j of y."""
    g = torch.Generator().manual_seed(3)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 4, 5, 5])  # class 3 absent, class 4 a single image
    z = F.normalize(torch.randn(len(labels), 3, generator=g, dtype=torch.float64), dim=1)
    stats = class_statistics(F.one_hot(labels, 6).double().T @ z, torch.bincount(labels, minlength=6), F2C)
    sq = torch.cdist(z, z) ** 2
    present = [0, 1, 2, 4, 5]
    assert stats.valid.tolist() == [k in present for k in range(6)]
    for p, q in itertools.product(present, repeat=2):
        if p != q:
            ref = sq[labels == p][:, labels == q].mean()
            torch.testing.assert_close(stats.distance[p, q], ref, rtol=1e-12, atol=1e-12)
    for y in present:
        block = sq[labels == y][:, labels == y]
        n = len(block)
        ref = block.sum() / (n * (n - 1)) if n > 1 else torch.tensor(0.0, dtype=torch.float64)
        torch.testing.assert_close(stats.intra[y], ref, rtol=1e-12, atol=1e-12)
    same = [(p, q) for p, q in itertools.permutations(present, 2) if F2C[p] == F2C[q]]
    other = [(p, q) for p, q in itertools.permutations(present, 2) if F2C[p] != F2C[q]]
    torch.testing.assert_close(stats.thresholds[0], torch.stack([stats.distance[p, q] for p, q in same]).mean())
    torch.testing.assert_close(stats.thresholds[1], torch.stack([stats.distance[p, q] for p, q in other]).mean())
    nearest = nearest_classes(stats.distance, stats.valid)
    for p in present:
        others = [q for q in present if q != p]
        assert int(nearest[p]) == min(others, key=lambda q: (float(stats.distance[p, q]), q))
    assert int(nearest[3]) == -1


def _labels(per_class: int = 12, classes: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(classes).repeat_interleave(per_class)
    return labels[torch.randperm(len(labels), generator=g)]


def test_anchor_neighbour_batches():
    labels = _labels()  # 72 images, 12 per class
    neighbours = torch.tensor([1, 0, 4, 5, 2, 3])
    bs = L_PRIME + L_PRIME * C + T
    order = anchor_neighbour_order(labels, 6, bs, torch.Generator().manual_seed(5),
                                   l_prime=L_PRIME, c=C, t=T, neighbour_of_class=neighbours)
    assert order.shape == (len(labels),) and order.dtype == torch.int64
    steps = len(labels) // bs
    randoms = []
    for s in range(steps):
        block = order[s * bs:(s + 1) * bs]
        anchors = [block[k * (1 + C)] for k in range(L_PRIME)]
        anchor_classes = labels[torch.stack(anchors)]
        assert len(set(anchor_classes.tolist())) == L_PRIME  # distinct random classes
        for k in range(L_PRIME):
            group = block[k * (1 + C) + 1:(k + 1) * (1 + C)]
            assert (labels[group] == neighbours[anchor_classes[k]]).all()  # c images of the nearest class
            assert len(set(group.tolist())) == C  # without replacement
        randoms += block[L_PRIME * (1 + C):].tolist()
    assert len(randoms) == steps * T and len(set(randoms)) == len(randoms)  # one permutation for the random part
    # determinism: a function of the generator alone
    again = anchor_neighbour_order(labels, 6, bs, torch.Generator().manual_seed(5),
                                   l_prime=L_PRIME, c=C, t=T, neighbour_of_class=neighbours)
    assert torch.equal(order, again)
    other = anchor_neighbour_order(labels, 6, bs, torch.Generator().manual_seed(6),
                                   l_prime=L_PRIME, c=C, t=T, neighbour_of_class=neighbours)
    assert not torch.equal(order, other)


def test_unknown_neighbours_are_random_other_classes():
    labels = _labels()
    bs = L_PRIME + L_PRIME * C + T
    seen = set()
    for seed in range(20):
        order = anchor_neighbour_order(labels, 6, bs, torch.Generator().manual_seed(seed), l_prime=L_PRIME, c=C, t=T,
                                       neighbour_of_class=torch.full((6,), -1))
        for s in range(len(labels) // bs):
            block = order[s * bs:(s + 1) * bs]
            for k in range(L_PRIME):
                anchor = int(labels[block[k * (1 + C)]])
                group = labels[block[k * (1 + C) + 1:(k + 1) * (1 + C)]]
                assert (group == group[0]).all() and int(group[0]) != anchor
                seen.add((anchor, int(group[0])))
    assert len(seen) == 30  # every ordered pair of distinct classes occurs


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"l_prime": 2, "c": 3, "t": 3}, "batch size"),
    ({"l_prime": 7, "c": 1, "t": 0}, "classes with images"),
])
def test_sampler_rejects_bad_sizes(kwargs, match):
    bs = kwargs["l_prime"] * (1 + kwargs["c"]) + (2 if "batch size" in match else kwargs["t"])
    with pytest.raises(ValueError, match=match):
        anchor_neighbour_order(_labels(), 6, bs, torch.Generator(), neighbour_of_class=torch.full((6,), -1), **kwargs)


def _views(n: int = 10, seed: int = 1, dtype=torch.float32) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 1, 12, 12, generator=g).to(dtype)]


BATCH_LABELS = torch.tensor([0, 1, 1, 1, 3, 4, 4, 4, 0, 5])  # an anchor-neighbour batch: 0 -> 1, 3 -> 4, 2 random


def test_training_step_loss_statistics_and_gradient():
    m = _method().double()
    ref = copy.deepcopy(m)
    out = run_step(m, Batch.of(_views(dtype=torch.float64), BATCH_LABELS))
    with torch.no_grad():
        z = F.normalize(ref.head(ref.backbone(_views(dtype=torch.float64)[0])), dim=1)
    # the batch entered the running sums; no epoch statistics yet, so the margins come from them
    onehot = F.one_hot(BATCH_LABELS, 6).double()
    torch.testing.assert_close(m.epoch_sum, onehot.T @ z, rtol=1e-12, atol=1e-12)
    assert m.epoch_count.tolist() == [2, 3, 0, 1, 3, 1] and int(m.class_count.sum()) == 0
    stats = class_statistics(onehot.T @ z, onehot.sum(0).long(), F2C)
    margins = violate_margins(BATCH_LABELS, F2C, stats.thresholds, stats.intra, 0.1)
    expected = _brute_force_loss(z, BATCH_LABELS, margins, squared=False)
    assert out["loss"].dtype == torch.float64
    torch.testing.assert_close(out["loss"], expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out["d_same_superclass"], stats.thresholds[0])
    # sibling pairs (0, 1), (3, 4) and other pairs are all in the batch: both levels are defined, and they differ
    assert float(stats.thresholds[0]) != float(stats.thresholds[1])
    out["loss"].backward()
    for module in (m.backbone, m.head):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


def test_set_epoch_fixes_the_statistics_and_the_neighbours():
    m = _method().double()
    m.on_epoch_start(0)  # nothing seen yet: no neighbour
    assert m.neighbour_of_class.tolist() == [-1] * 6 and int(m.stats_epoch) == 0
    with torch.no_grad():
        run_step(m, Batch.of(_views(dtype=torch.float64), BATCH_LABELS))
        run_step(m, Batch.of(_views(seed=2, dtype=torch.float64), BATCH_LABELS.flip(0)))
    sums, counts = m.epoch_sum.clone(), m.epoch_count.clone()
    m.on_epoch_start(1)
    assert torch.equal(m.class_sum, sums) and torch.equal(m.class_count, counts)
    assert int(m.epoch_count.sum()) == 0 and int(m.stats_epoch) == 1
    stats = class_statistics(sums, counts, F2C)
    assert torch.equal(m.neighbour_of_class, nearest_classes(stats.distance, stats.valid))
    assert int(m.neighbour_of_class[2]) == -1  # class 2 never seen
    for p in (0, 1, 3, 4, 5):  # the nearest class centre by d(p, q) = 2 - 2 mu_p . mu_q
        mu = sums / counts.clamp(min=1)[:, None]
        d = {q: float(2 - 2 * mu[p] @ mu[q]) for q in (0, 1, 3, 4, 5) if q != p}
        assert int(m.neighbour_of_class[p]) == min(d, key=d.get)
    ctx = m.sampling_context
    assert (ctx["l_prime"], ctx["c"], ctx["t"]) == (L_PRIME, C, T) and torch.equal(ctx["neighbour_of_class"],
                                                                                   m.neighbour_of_class)
    # the epoch's statistics now drive the margins, whatever the running sums of the new epoch hold
    with torch.no_grad():
        out = run_step(m, Batch.of(_views(seed=3, dtype=torch.float64), BATCH_LABELS))
    torch.testing.assert_close(out["d_same_superclass"], stats.thresholds[0])
    # a second call for the same epoch (a resume inside it) changes nothing
    state = copy.deepcopy(m.state_dict())
    m.on_epoch_start(1)
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in state.items())


def test_state_dict_round_trip_restores_the_statistics():
    m = _method()
    m.on_epoch_start(0)
    run_step(m, Batch.of(_views(), BATCH_LABELS))["loss"].backward()
    m.on_epoch_start(1)
    run_step(m, Batch.of(_views(seed=2), BATCH_LABELS))
    state = m.state_dict()
    for key in ("epoch_sum", "epoch_count", "class_sum", "class_count", "neighbour_of_class", "stats_epoch"):
        assert key in state
    other = _method(seed=3)
    other.load_state_dict(state)
    for key in ("epoch_sum", "epoch_count", "class_sum", "class_count", "neighbour_of_class", "stats_epoch"):
        assert torch.equal(getattr(other, key), getattr(m, key)), key
    assert torch.equal(other.sampling_context["neighbour_of_class"], m.sampling_context["neighbour_of_class"])
    a = run_step(m, Batch.of(_views(seed=4), BATCH_LABELS))["loss"]
    b = run_step(other, Batch.of(_views(seed=4), BATCH_LABELS))["loss"]
    assert torch.equal(a, b)


@pytest.mark.parametrize(("method", "batch_size", "info", "match"), [
    ({}, 12, DataInfo(6, 1, F2C), "batch_size"),
    ({"c": 0, "t": 8}, 10, DataInfo(6, 1, F2C), "c >= 1"),
    ({}, 10, DataInfo(6, 1, None), "superclass"),
    ({"l_prime": 0, "c": 1, "t": 10}, 10, DataInfo(6, 1, F2C), "l_prime >= 1"),
    ({"l_prime": 5, "c": 1, "t": 0}, 10, DataInfo(4, 1, F2C[:4]), "exceeds"),
])
def test_rejects_bad_settings(method, batch_size, info, match):
    with pytest.raises(ValueError, match=match):
        method_class("hierarchical_triplet")(_cfg(batch_size=batch_size, **method), info)


# ---- the train loop: anchor-neighbour epochs and bit-exact resume -------------------------------------------


class Preempted(Exception):
    pass


def _train_setup(epochs: int = 3):
    g = torch.Generator().manual_seed(0)
    labels = _labels(per_class=8)  # 48 images, 4 steps of 10 per epoch
    images = (torch.rand(len(labels), 1, 12, 12, generator=g) * 255).to(torch.uint8)
    names = [f"c{k}" for k in range(6)]
    data = ImageSet("fashion_mnist", images, labels, names, F2C[labels], ["s0", "s1", "s2"])
    cfg = _cfg()
    cfg.data.name, cfg.data.augment = "fashion_mnist", "supcon"
    cfg.schedule.epochs, cfg.optim.warmup_epochs, cfg.optim.lr = epochs, 0, 0.05
    return data, cfg


def _fresh(cfg):
    torch.manual_seed(11)
    return method_class("hierarchical_triplet")(cfg, DataInfo(6, 1, F2C))


def test_train_loop_resumes_bit_exact(tmp_path, monkeypatch):
    data, cfg = _train_setup()
    ref = _fresh(cfg)
    history = train_mod.train(ref, data, cfg, seed=123, ckpt=tmp_path / "a.pt")
    assert len(history) == 3 and all(h["loss"] > 0 for h in history)
    assert int(ref.stats_epoch) == 2 and (ref.neighbour_of_class >= 0).all()  # every class seen, a neighbour each

    real_save = checkpointer_mod.save_atomic

    def save_then_die(state, path):  # killed right after the epoch-1 checkpoint
        real_save(state, path)
        if state["epoch"] == 1:
            raise Preempted

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    with pytest.raises(Preempted):
        train_mod.train(_fresh(cfg), data, cfg, seed=123, ckpt=tmp_path / "b.pt")
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real_save)

    # a requeue signal in epoch 2 (step 6 overall: 4 steps per epoch)
    calls = {"n": 0}
    real_pending = interrupt.pending

    def signal_at_step_6() -> bool:
        calls["n"] += 1
        if calls["n"] == 2:  # epoch 1 (resumed), 2nd step
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real_pending()

    monkeypatch.setattr(interrupt, "pending", signal_at_step_6)
    with pytest.raises(Preempted):
        train_mod.train(_fresh(cfg), data, cfg, seed=123, ckpt=tmp_path / "b.pt")
    state = torch.load(tmp_path / "b.pt", weights_only=False)
    assert (state["epoch"], state["step"]) == (1, 2) and int(state["method"]["stats_epoch"]) == 1
    monkeypatch.setattr(interrupt, "pending", real_pending)

    resumed = _fresh(cfg)
    history_b = train_mod.train(resumed, data, cfg, seed=123, ckpt=tmp_path / "b.pt")
    assert [h["loss"] for h in history_b] == [h["loss"] for h in history]
    for key, value in ref.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key
