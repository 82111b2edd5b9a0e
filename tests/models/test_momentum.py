"""Momentum encoder update, the key queue, and the DDP gather."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from semcl.models import (
    MemoryBank,
    build_backbone,
    gather_from_all_ranks,
    momentum_copy,
    momentum_update_,
)


def _pair(seed: int = 0) -> tuple[nn.Module, nn.Module]:
    """A float64 online encoder (with BN buffers) and its diverged momentum copy."""
    torch.manual_seed(seed)
    online = build_backbone("resnet_tiny").double()
    target = momentum_copy(online)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn_like(p))
    return target, online


def _snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_momentum_copy_freezes_and_detaches() -> None:
    online = build_backbone("resnet_tiny")
    target = momentum_copy(online)
    assert all(not p.requires_grad for p in target.parameters())
    assert all(p.requires_grad for p in online.parameters())
    for a, b in zip(target.parameters(), online.parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()


@pytest.mark.parametrize("m", [0.99, 0.5])
def test_update_matches_formula_float64(m: float) -> None:
    target, online = _pair()
    before_t, before_o = _snapshot(target), _snapshot(online)
    momentum_update_(target, online, m)
    names = {n for n, _ in target.named_parameters()}
    for name in names:
        expected = m * before_t[name] + (1 - m) * before_o[name]
        torch.testing.assert_close(target.state_dict()[name], expected, rtol=1e-13, atol=1e-13)
    # The online encoder is read, never written.
    for k, v in online.state_dict().items():
        assert torch.equal(v, before_o[k])


def test_update_edge_cases_are_exact() -> None:
    target, online = _pair()
    before = _snapshot(target)
    momentum_update_(target, online, 1.0)
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k])
    momentum_update_(target, online, 0.0)
    for (_, a), (_, b) in zip(target.named_parameters(), online.named_parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        momentum_update_(target, online, 1.5)


def test_buffers_not_averaged() -> None:
    target, online = _pair()
    online.train()
    online(torch.randn(4, 3, 16, 16, dtype=torch.float64))  # moves online BN stats
    buffers_before = {n: b.clone() for n, b in target.named_buffers()}
    momentum_update_(target, online, 0.9)
    for name, buf in target.named_buffers():
        assert torch.equal(buf, buffers_before[name]), name
    assert not torch.equal(dict(online.named_buffers())["bn1.running_mean"], buffers_before["bn1.running_mean"])


def test_update_after_load_state_dict() -> None:
    target, online = _pair(0)
    momentum_update_(target, online, 0.9)  # any internal state is now "warm"
    new_target, new_online = _pair(1)
    target.load_state_dict(new_target.state_dict())
    online.load_state_dict(new_online.state_dict())
    _check_formula(target, online, 0.99)


def _check_formula(target: nn.Module, online: nn.Module, m: float) -> None:
    before_t, before_o = _snapshot(target), _snapshot(online)
    momentum_update_(target, online, m)
    for name, p in target.named_parameters():
        expected = m * before_t[name] + (1 - m) * before_o[name]
        torch.testing.assert_close(p, expected, rtol=1e-13, atol=1e-13)


def test_update_after_assign_load_and_module_swap() -> None:
    """The update must follow replaced parameters and submodules."""
    target, online = _pair(0)
    momentum_update_(target, online, 0.9)
    fresh_t, fresh_o = _pair(1)
    target.load_state_dict(fresh_t.state_dict(), assign=True)
    online.load_state_dict(fresh_o.state_dict(), assign=True)
    _check_formula(target, online, 0.99)

    online.layer1 = build_backbone("resnet_tiny").double().layer1
    target.layer1 = momentum_copy(online.layer1)
    with torch.no_grad():
        for p in online.layer1.parameters():
            p.add_(1.0)
    _check_formula(target, online, 0.99)

    other_online = momentum_copy(online)  # same target, new online module
    with torch.no_grad():
        for p in other_online.parameters():
            p.add_(torch.randn_like(p))
    _check_formula(target, other_online, 0.5)


def test_update_is_one_fused_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = torch._foreach_lerp_

    def spy(tensors: list[torch.Tensor], others: list[torch.Tensor], weight: float) -> None:
        calls.append(len(tensors))
        return real(tensors, others, weight)

    monkeypatch.setattr(torch, "_foreach_lerp_", spy)
    target, online = _pair()
    momentum_update_(target, online, 0.99)
    assert calls == [len(list(online.parameters()))]


def test_mismatched_models_rejected() -> None:
    with pytest.raises(ValueError, match="parameters"):
        momentum_update_(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)), 0.9)


def test_bank_init() -> None:
    bank = MemoryBank(50, 8, generator=torch.Generator().manual_seed(0))
    assert bank.features.shape == (50, 8) and bank.features.dtype == torch.float32
    torch.testing.assert_close(bank.features.norm(dim=1), torch.ones(50))
    assert torch.equal(bank.labels, torch.full((50,), -1))
    assert bank.labels.dtype == torch.int64
    assert bank.ptr.dtype == torch.int64 and bank.ptr.dim() == 0 and int(bank.ptr) == 0
    assert bank.filled == 0
    again = MemoryBank(50, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(bank.features, again.features)
    assert set(bank.state_dict()) == {"features", "labels", "ptr"}


def test_bank_wraparound_hand_case() -> None:
    bank = MemoryBank(5, 2)
    init = bank.features.clone()
    storage = bank.features.data_ptr(), bank.labels.data_ptr()
    first = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    bank.enqueue(first, torch.tensor([10, 11, 12]))
    assert int(bank.ptr) == 3
    assert torch.equal(bank.labels, torch.tensor([10, 11, 12, -1, -1]))
    assert torch.equal(bank.features[:3], first)
    assert torch.equal(bank.features[3:], init[3:])
    assert bank.filled == 3

    second = torch.tensor([[4.0, 0.0], [5.0, 0.0], [6.0, 0.0]])
    bank.enqueue(second, torch.tensor([13, 14, 15]))
    assert int(bank.ptr) == 1
    assert torch.equal(bank.labels, torch.tensor([15, 11, 12, 13, 14]))
    assert torch.equal(bank.features[:, 0], torch.tensor([6.0, 2.0, 3.0, 4.0, 5.0]))
    assert bank.filled == 5
    # Written in place: same storage, no reallocation.
    assert (bank.features.data_ptr(), bank.labels.data_ptr()) == storage


def test_bank_full_batch_and_errors() -> None:
    bank = MemoryBank(4, 3)
    bank.enqueue(torch.ones(4, 3), torch.arange(4))
    assert int(bank.ptr) == 0 and torch.equal(bank.labels, torch.arange(4))
    with pytest.raises(ValueError, match="bank of size 4"):
        bank.enqueue(torch.ones(5, 3), torch.arange(5))
    with pytest.raises(ValueError, match="shape"):
        bank.enqueue(torch.ones(2, 4), torch.arange(2))
    with pytest.raises(ValueError, match="labels"):
        bank.enqueue(torch.ones(2, 3), torch.arange(3))


def test_bank_state_dict_round_trip() -> None:
    bank = MemoryBank(7, 4, generator=torch.Generator().manual_seed(1))
    for step in range(3):
        bank.enqueue(torch.randn(3, 4), torch.arange(3) + 10 * step)
    restored = MemoryBank(7, 4, generator=torch.Generator().manual_seed(2))
    restored.load_state_dict(bank.state_dict())
    for name in ("features", "labels", "ptr"):
        assert torch.equal(getattr(restored, name), getattr(bank, name)), name
    assert int(restored.ptr) == 9 % 7
    # Both continue identically after the restore.
    keys, labels = torch.randn(3, 4), torch.tensor([7, 8, 9])
    bank.enqueue(keys, labels)
    restored.enqueue(keys, labels)
    assert torch.equal(restored.features, bank.features)
    assert torch.equal(restored.labels, bank.labels)
    assert torch.equal(restored.ptr, bank.ptr)


def test_gather_is_identity_without_distributed() -> None:
    t = torch.randn(3, 2)
    assert gather_from_all_ranks(t) is t


def _gather_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        local = torch.arange(6, dtype=torch.float32).reshape(3, 2) + 100 * rank
        torch.save(gather_from_all_ranks(local), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # spawns two interpreters: ~4 s
def test_gather_two_processes_gloo(tmp_path: Path) -> None:
    world = 2
    mp.spawn(_gather_worker, args=(world, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=world, join=True)
    local = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    expected = torch.cat([local + 100 * r for r in range(world)])
    for rank in range(world):
        assert torch.equal(torch.load(tmp_path / f"rank{rank}.pt"), expected)
