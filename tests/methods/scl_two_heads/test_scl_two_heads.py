"""RINCE's "SCL two heads" baseline: L = (1 − λ)·SCL(fine head) + λ·SCL(superclass head), one memory bank per head."""

from __future__ import annotations

import copy

import pytest
import torch

from semcl.errors import ConfigError
from semcl.losses import ranked_info_nce
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import METHODS, PLANNED_METHODS, method_class
from semcl.run_config import build_config

F2C = torch.tensor([0, 0, 1, 1, 2, 2])  # 6 classes, 3 superclasses of 2
LABELS = torch.tensor([0, 1, 2, 0, 3, 5, 4, 1])
BANK, DIM = 24, 4


pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _cfg(name: str = "scl_two_heads", **method):
    return build_config({"method": {"name": name, "bank_size": BANK, **method},
                         "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": DIM}}, where="test")


def _method(seed: int = 0, prefill: bool = True, **method):
    torch.manual_seed(seed)
    m = method_class("scl_two_heads")(_cfg(**method), DataInfo(6, 1, F2C))
    if prefill:  # 16 of 24 slots filled (the rest stay label -1: negatives), different keys per bank
        g = torch.Generator().manual_seed(100 + seed)
        bank_labels = torch.randint(0, 6, (16,), generator=g)
        for bank in (m.bank, m.coarse_bank):
            bank.enqueue(torch.nn.functional.normalize(torch.randn(16, DIM, generator=g), dim=1), bank_labels)
    return m


def _views(n: int = len(LABELS), dtype=torch.float32) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(n, 1, 12, 12, generator=g).to(dtype) for _ in range(2)]


def _projections(m):
    """(q_fine, q_coarse, k_fine, k_coarse) of a copy taken before the step (the step moves the key encoder)."""
    views = _views(dtype=next(m.parameters()).dtype)
    feats, key_feats = m.backbone(views[0]), m.key_backbone(views[1])
    return m.head(feats), m.coarse_head(feats), m.key_head(key_feats), m.key_coarse_head(key_feats)


def _scl_by_hand(q, k, bank_feats, bank_labels, labels, same, tau, form):
    """SCL over [own key, bank] written out: positives = own key + bank entries with same(label, bank label)."""
    sim = torch.cat([(q * k).sum(1, keepdim=True), q @ bank_feats.T], dim=1) / tau
    valid = bank_labels >= 0
    pos = torch.cat([torch.ones(len(labels), 1, dtype=torch.bool),
                     same(labels[:, None], bank_labels.clamp(min=0)[None, :]) & valid[None, :]], dim=1)
    e = sim.exp()
    if form == "in":  # -log(Σ_P e / Σ_all e), mean over anchors (every anchor has its own key)
        return -(torch.log((e * pos).sum(1) / e.sum(1))).mean()
    neg_sum = (e * ~pos).sum(1, keepdim=True)  # "out": -log(e_p / (e_p + Σ_N e)), mean over all pairs
    return -(torch.log(e / (e + neg_sum)))[pos].mean()


def _sim_and_ranks(q, k, bank_feats, bank_labels, labels, same):
    sim = torch.cat([(q * k).sum(1, keepdim=True), q @ bank_feats.T], dim=1)
    bank_pos = same(labels[:, None], bank_labels.clamp(min=0)[None, :]) & (bank_labels >= 0)[None, :]
    return sim, torch.cat([torch.ones(len(labels), 1, dtype=torch.long), bank_pos.long()], dim=1)


def _same_class(a, b):
    return a == b


def _same_superclass(a, b):
    return F2C[a] == F2C[b]


def test_schema_and_registry():
    assert "scl_two_heads" in METHODS and "scl_two_heads" not in PLANNED_METHODS
    m = build_config({"method": {"name": "scl_two_heads"}}, where="x").method
    assert (m.form, m.tau, m.bank_size, m.momentum, m.weight) == ("in", 0.1, 4096, 0.99, 0.1)
    assert method_class("scl_two_heads").num_views == 2


@pytest.mark.parametrize("form", ["in", "out"])
def test_loss_is_weighted_sum_of_fine_and_superclass_scl(form):
    lam = 0.3
    m = _method(form=form, weight=lam).double()
    ref = copy.deepcopy(m)
    fine_feats, fine_labels = m.bank.features.clone(), m.bank.labels.clone()
    coarse_feats, coarse_labels = m.coarse_bank.features.clone(), m.coarse_bank.labels.clone()
    out = run_step(m, Batch.of(_views(dtype=torch.float64), LABELS))
    with torch.no_grad():
        qf, qc, kf, kc = _projections(ref)
        fine = _scl_by_hand(qf, kf, fine_feats, fine_labels, LABELS, _same_class, 0.1, form)
        coarse = _scl_by_hand(qc, kc, coarse_feats, coarse_labels, LABELS, _same_superclass, 0.1, form)
        # the same through the library loss, from the same projections and banks
        lib_fine = ranked_info_nce(*_sim_and_ranks(qf, kf, fine_feats, fine_labels, LABELS, _same_class), [0.1], form=form)
        lib_coarse = ranked_info_nce(*_sim_and_ranks(qc, kc, coarse_feats, coarse_labels, LABELS, _same_superclass),
                                     [0.1], form=form)
    assert out["loss"].dtype == torch.float64
    torch.testing.assert_close(out["loss_fine"], fine, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss_coarse"], coarse, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss"], (1 - lam) * fine + lam * coarse, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss"], (1 - lam) * lib_fine + lam * lib_coarse, rtol=1e-12, atol=1e-12)
    # the superclass ranks do differ from the fine ones here (siblings in the batch and the bank)
    assert not torch.allclose(fine, coarse)
    # both heads and the backbone get a gradient; the key encoder none
    out["loss"].backward()
    for module in (m.backbone, m.head, m.coarse_head):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    assert all(p.grad is None for p in m.key_backbone.parameters())


@pytest.mark.parametrize("form", ["in", "out"])
def test_weight_zero_is_plain_scl_on_the_fine_head(form):
    two = _method(form=form, weight=0.0)
    torch.manual_seed(7)  # different init: the SCL method gets the fine pieces from the state dict
    scl = method_class("scl")(_cfg("scl", form=form), DataInfo(6, 1, F2C))
    result = scl.load_state_dict(two.state_dict(), strict=False)
    assert result.missing_keys == [] and all(k.startswith(("coarse_", "key_coarse_")) for k in result.unexpected_keys)
    loss_two = run_step(two, Batch.of(_views(), LABELS))["loss"]
    loss_scl = run_step(scl, Batch.of(_views(), LABELS))["loss"]
    torch.testing.assert_close(loss_two, loss_scl, rtol=1e-6, atol=0.0)
    loss_two.backward()
    loss_scl.backward()
    for (name, p), q in zip(two.backbone.named_parameters(), scl.backbone.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)
    assert all(p.grad.abs().sum() == 0 for p in two.coarse_head.parameters())


def test_both_banks_receive_keys_and_fine_labels_after_backward():
    m = _method()
    ref = copy.deepcopy(m)
    before = {name: copy.deepcopy(b.state_dict()) for name, b in (("fine", m.bank), ("coarse", m.coarse_bank))}
    loss = run_step(m, Batch.of(_views(), LABELS))["loss"]
    for name, bank in (("fine", m.bank), ("coarse", m.coarse_bank)):  # nothing written before backward
        assert all(torch.equal(v, before[name][k]) for k, v in bank.state_dict().items())
    loss.backward()
    m.after_backward()
    with torch.no_grad():
        _, _, kf, kc = _projections(ref)
    n = len(LABELS)
    for bank, keys in ((m.bank, kf), (m.coarse_bank, kc)):
        assert int(bank.ptr) == (16 + n) % BANK  # wrapped round to slot 0
        assert torch.equal(bank.labels[16:16 + n], LABELS)  # fine labels in both banks
        torch.testing.assert_close(bank.features[16:16 + n], keys)
    assert not torch.allclose(m.bank.features[16:16 + n], m.coarse_bank.features[16:16 + n])
    m.after_backward()  # a second call writes nothing
    assert int(m.bank.ptr) == int(m.coarse_bank.ptr) == (16 + n) % BANK


def test_state_dict_round_trip_restores_both_banks_and_key_encoders():
    m = _method()
    run_step(m, Batch.of(_views(), LABELS))["loss"].backward()
    m.after_backward()
    state = m.state_dict()
    for key in ("bank.features", "bank.labels", "bank.ptr", "coarse_bank.features", "coarse_bank.labels",
                "coarse_bank.ptr", "key_coarse_head.net.0.weight", "key_head.net.0.weight"):
        assert key in state
    other = _method(seed=3, prefill=False)
    other.load_state_dict(state)
    for name in ("bank", "coarse_bank"):
        for k, v in getattr(m, name).state_dict().items():
            assert torch.equal(getattr(other, name).state_dict()[k], v), f"{name}.{k}"
    a = run_step(m, Batch.of(_views(), LABELS))
    b = run_step(other, Batch.of(_views(), LABELS))
    assert torch.equal(a["loss"], b["loss"])


def test_deterministic_on_cpu():
    losses = []
    for _ in range(2):
        m = _method()
        step = []
        for _ in range(2):
            loss = run_step(m, Batch.of(_views(), LABELS))["loss"]
            loss.backward()
            m.after_backward()
            step.append(loss.detach())
        losses.append(torch.stack(step))
    assert torch.equal(losses[0], losses[1])


@pytest.mark.parametrize(("method", "match"), [
    ({"form": "out_in"}, "'method.form' = 'out_in' is not one of"),
    ({"weight": 1.5}, "'method.weight' .lambda. must lie in"),
])
def test_config_rejects_bad_settings(method, match):
    # the schema's choices and range check: refused when the config is built, naming the key
    with pytest.raises(ConfigError, match=match):
        _cfg(**method)


def test_rejects_a_dataset_without_superclasses():
    with pytest.raises(ValueError, match="superclass"):
        method_class("scl_two_heads")(_cfg(), DataInfo(6, 1, None))
