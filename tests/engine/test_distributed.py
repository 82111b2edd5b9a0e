"""Data-parallel pieces on 2 CPU processes with the gloo backend: the averaged gradient equals the
full-batch gradient, and every rank's memory bank receives the keys and labels of both ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.engine import distributed
from semcl.models import MemoryBank, gather_from_all_ranks

B, D, C = 8, 5, 3


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, D, generator=g, dtype=torch.float64), torch.randint(0, C, (B,), generator=g)


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(D, C).double()


def _worker(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    x, y = _data()
    part = distributed.local_slice(B)
    model = _model()
    torch.nn.functional.cross_entropy(model(x[part]), y[part]).backward()
    distributed.average_gradients_(list(model.parameters()))
    bank = MemoryBank(6, 2)
    keys = torch.full((2, 2), float(rank + 1))
    labels = torch.tensor([10 * rank, 10 * rank + 1])
    bank.enqueue(gather_from_all_ranks(keys), gather_from_all_ranks(labels))
    torch.save({"grads": [p.grad for p in model.parameters()], "bank": bank.state_dict(),
                "slice": (part.start, part.stop)}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def test_gradient_average_and_gathered_enqueue(tmp_path):
    mp.spawn(_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    x, y = _data()
    model = _model()
    torch.nn.functional.cross_entropy(model(x), y).backward()  # one process, whole batch
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["slice"] == (4 * rank, 4 * rank + 4)
        for g, ref in zip(got["grads"], (p.grad for p in model.parameters()), strict=True):
            torch.testing.assert_close(g, ref, rtol=1e-12, atol=1e-12)
        bank = got["bank"]
        assert bank["labels"].tolist() == [0, 1, 10, 11, -1, -1]
        assert bank["features"][:4, 0].tolist() == [1.0, 1.0, 2.0, 2.0]
        assert int(bank["ptr"]) == 4


def test_single_process_is_a_no_op():
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert distributed.local_slice(6) == slice(0, 6)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    distributed.average_gradients_([p])
    assert p.grad.tolist() == [2.0, 2.0, 2.0]
