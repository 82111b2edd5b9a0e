"""Data-parallel pieces on 2 CPU processes with the gloo backend: DistributedDataParallel's averaged
gradient equals the full-batch gradient (and stays local under no_sync), every rank's memory bank
receives the keys and labels of both ranks (also PaCo's queue), shuffle-BN computes each key's
BatchNorm statistics on a shuffled shard, and the ranks' stop vote agrees on one boundary, read one vote late."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import method_class
from semcl.models import MemoryBank, gather_from_all_ranks, shuffled_forward
from semcl.run_config import build_config
from semcl.runtime import distributed

B, D, C = 8, 5, 3


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, D, generator=g, dtype=torch.float64), torch.randint(0, C, (B,), generator=g)


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(D, C).double()


class _Step(torch.nn.Module):
    """The smallest method: a linear classifier whose training step is cross-entropy."""

    def __init__(self):
        super().__init__()
        self.linear = _model()
        self.unused = torch.nn.Linear(2, 2).double()  # a head left out of the step (DDP must not hang)

    def loss(self, batch):
        x, y = batch
        return {"loss": torch.nn.functional.cross_entropy(self.linear(x), y)}


def _worker(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    x, y = _data()
    part = distributed.local_slice(B)
    method = _Step()
    ddp = distributed.wrap(method)
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel)
    ddp((x[part], y[part])).backward()
    full = [p.grad.clone() for p in method.linear.parameters()]
    # accumulation: two micro-batches of the slice, the first under no_sync, then one all-reduce
    for p in method.parameters():
        p.grad = None
    half = [slice(part.start, part.start + 2), slice(part.start + 2, part.stop)]
    for k, sl in enumerate(half):
        with distributed.sync_context(ddp, sync=k == 1):
            ddp((x[sl], y[sl])).backward()
        if k == 0:  # no all-reduce yet: this rank's own gradient only
            mine = [p.grad.clone() for p in method.linear.parameters()]
    bank = MemoryBank(6, 2)
    keys = torch.full((2, 2), float(rank + 1))
    labels = torch.tensor([10 * rank, 10 * rank + 1])
    bank.enqueue(gather_from_all_ranks(keys), gather_from_all_ranks(labels))
    flags = (distributed.any_rank(rank == 1, torch.device("cpu")), distributed.any_rank(False, torch.device("cpu")))
    rng = distributed.gather_rng_states({"rank": torch.tensor([rank])})
    torch.save({"grads": full, "accum": [p.grad for p in method.linear.parameters()], "mine": mine,
                "unused": [p.grad for p in method.unused.parameters()], "bank": bank.state_dict(),
                "slice": (part.start, part.stop), "flags": flags, "rng": [int(r["rank"]) for r in rng]},
               f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def test_ddp_gradient_average_no_sync_and_gathered_enqueue(tmp_path):
    """DDP on 2 gloo ranks: the averaged gradient equals one process's full-batch gradient; under
    no_sync a micro-batch's gradient stays local; banks get both ranks' keys; the checkpoint flag and
    the RNG states are shared."""
    mp.spawn(_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    x, y = _data()
    model = _model()
    torch.nn.functional.cross_entropy(model(x), y).backward()  # one process, whole batch
    ref = [p.grad for p in model.parameters()]
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["slice"] == (4 * rank, 4 * rank + 4)
        for g, want in zip(got["grads"], ref, strict=True):
            torch.testing.assert_close(g, want, rtol=1e-12, atol=1e-12)
        # two micro-batches of 2: the mean of their mean losses is the slice's mean loss
        for g, want in zip(got["accum"], ref, strict=True):
            torch.testing.assert_close(g / 2, want, rtol=1e-12, atol=1e-12)
        first = _model()
        sl = slice(4 * rank, 4 * rank + 2)
        torch.nn.functional.cross_entropy(first(x[sl]), y[sl]).backward()
        for g, want in zip(got["mine"], (p.grad for p in first.parameters()), strict=True):
            torch.testing.assert_close(g, want, rtol=1e-12, atol=1e-12)
        assert got["unused"] == [None, None]
        bank = got["bank"]
        assert bank["labels"].tolist() == [0, 1, 10, 11, -1, -1]
        assert bank["features"][:4, 0].tolist() == [1.0, 1.0, 2.0, 2.0]
        assert int(bank["ptr"]) == 4
        assert got["flags"] == (True, False) and got["rng"] == [0, 1]


def test_single_process_is_a_no_op():
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert distributed.local_slice(6) == slice(0, 6)
    assert distributed.wrap(_Step()) is None and distributed.gather_rng_states({}) is None
    assert distributed.any_rank(True, torch.device("cpu")) is True


def test_peer_faults_are_told_from_bugs():
    assert distributed.is_peer_fault(RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer"))
    assert distributed.is_peer_fault(RuntimeError("Timed out waiting 30000ms for recv operation to complete"))
    assert not distributed.is_peer_fault(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not distributed.is_peer_fault(ValueError("timed out"))


def _bn_encoder():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.BatchNorm1d(4)).double()


def _shuffle_worker(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    x, _ = _data()
    part = distributed.local_slice(B)
    encoder = _bn_encoder()
    torch.manual_seed(7)  # rank 0 draws the permutation from its global generator
    keys = shuffled_forward(encoder, x[part])
    linear = torch.nn.Linear(D, 3).double()
    plain = shuffled_forward(linear, x[part]), linear(x[part])
    # PaCo: the queue of every rank takes both ranks' keys and labels
    cfg = build_config({"method": {"name": "paco", "queue_size": 16},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4}}, where="test")
    torch.manual_seed(0)
    paco = method_class("paco")(cfg, DataInfo(4, 1, None, torch.tensor([3, 3, 1, 1])))
    g = torch.Generator().manual_seed(1)
    views = [torch.randn(B, 1, 12, 12, generator=g) for _ in range(2)]
    labels = torch.tensor([0, 1, 2, 3, 0, 1, 0, 1])
    run_step(paco, Batch.of([v[part] for v in views], labels[part]))["loss"].backward()
    paco.after_backward()
    torch.save({"keys": keys, "plain": plain, "bank_labels": paco.bank.labels.clone(), "ptr": int(paco.bank.ptr)},
               f"{out}/shuffle{rank}.pt")
    dist.destroy_process_group()


def test_shuffle_bn_and_gathered_paco_queue(tmp_path):
    mp.spawn(_shuffle_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    x, _ = _data()
    torch.manual_seed(7)
    perm = torch.randperm(B)
    expected = torch.empty(B, 4, dtype=torch.float64)
    for shard in (perm[:4], perm[4:]):  # BN statistics of each shuffled shard, as one rank computes them
        expected[shard] = _bn_encoder()(x[shard]).detach()
    assert not torch.allclose(expected[:4], _bn_encoder()(x[:4]).detach())  # the shuffle changes the keys
    for rank in (0, 1):
        got = torch.load(tmp_path / f"shuffle{rank}.pt")
        torch.testing.assert_close(got["keys"], expected[4 * rank:4 * rank + 4], rtol=1e-12, atol=1e-12)
        shuffled, direct = got["plain"]
        torch.testing.assert_close(shuffled, direct, rtol=1e-12, atol=1e-12)  # no BN: the shuffle is invisible
        assert got["bank_labels"][:8].tolist() == [0, 1, 2, 3, 0, 1, 0, 1] and got["ptr"] == 8


def _vote_worker(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    cpu = torch.device("cpu")
    vote, asked, agreed = distributed.StopVote(cpu, accum=1, every=4), [], []
    for done in range(1, 20):  # rank 1 wants a checkpoint from batch 5 on, rank 0 never
        if vote.agree(done, lambda d=done: asked.append(d) or (rank == 1 and d >= 5)):
            agreed.append(done)
    # accumulation cycles of 3: a vote every 6 batches; reset (an epoch's end) drops the vote in flight
    cycles = distributed.StopVote(cpu, accum=3, every=4)
    dropped = [cycles.agree(6, lambda: True)]
    cycles.reset()
    dropped += [cycles.agree(12, lambda: False), cycles.agree(18, lambda: False)]
    torch.save({"asked": asked, "agreed": agreed, "every": cycles.every, "dropped": dropped}, f"{out}/vote{rank}.pt")
    dist.destroy_process_group()


def test_the_stop_vote_agrees_on_one_boundary_one_vote_late(tmp_path):
    """Votes every 4 batches: at 4 nobody asks, at 8 rank 1 does (its signal came at batch 5), and at 12 both
    ranks read that vote and checkpoint; the flag is asked only when a vote is cast (4, 8, 16: 12 acted)."""
    mp.spawn(_vote_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"vote{rank}.pt")
        assert got["agreed"] == [12] and got["asked"] == [4, 8, 16]
        assert got["every"] == 6 and got["dropped"] == [False, False, False]


def test_one_process_stops_at_once():
    vote, asked = distributed.StopVote(torch.device("cpu"), accum=1, every=4), []
    assert [vote.agree(d, lambda d=d: asked.append(d) or d == 3) for d in range(1, 6)] == [False, False, True,
                                                                                              False, False]
    assert asked == [1, 2, 3, 4, 5]
