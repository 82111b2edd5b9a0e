"""HSA's mining under DDP and under a requeue signal: 2 gloo ranks mine the single-process table (N odd), and a
signal that comes during a mining stops it between chunks; the loop checkpoints the epoch's start and the
resumed run mines again and ends as the uninterrupted run, bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.data import ImageSet, stats
from semcl.data.semantics import knn_shards
from semcl.data.views.build import build_augment
from semcl.engine import train as train_mod
from semcl.methods.base import DataInfo, TrainContext
from semcl.methods.registry import method_class
from semcl.run_config import build_config
from semcl.runtime import interrupt

SIZE = 12


class Preempted(Exception):
    """Stands in for submitit's requeue (which exits the process)."""


def _cfg(**knobs):
    return build_config({"method": {"name": "hsa", "queue_size": 16, "k": 3, "companions": False, **knobs},
                         "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4},
                         "data": {"name": "fashion_mnist", "augment": "supcon"},
                         "optim": {"batch_size": 10, "warmup_epochs": 0, "lr": 0.05},
                         "schedule": {"epochs": 2}}, where="test")


def _fresh(cfg):
    torch.manual_seed(0)
    return method_class("hsa")(cfg, DataInfo(3, 1, None))


def _images(n: int) -> torch.Tensor:
    return torch.randint(0, 256, (n, 1, SIZE, SIZE), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))


def _mine_once(n: int = 23):
    """A fresh method's epoch-0 table over n images; batches of 4 images, the same on 1 and on 2 ranks."""
    m = _fresh(_cfg(mining_batch=4))
    mean, std = stats("fashion_mnist")
    aug = build_augment("supcon", size=SIZE, mean=mean, std=std)
    images = _images(n)
    m.on_train_start(TrainContext(SimpleNamespace(images=images, labels=torch.zeros(n, dtype=torch.long)), [aug],
                                  torch.device("cpu"), None, 0))
    m.on_epoch_start(0)
    return m.neighbours.table


def _worker(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.save(_mine_once(), f"{out}/table{rank}.pt")
    dist.destroy_process_group()


def test_two_ranks_mine_the_single_process_table(tmp_path):
    mp.spawn(_worker, args=(f"file://{tmp_path}/init", str(tmp_path)), nprocs=2, join=True)
    expected = _mine_once()
    assert expected.shape == (23, 3)
    for rank in (0, 1):  # each rank encoded 12 / 11 images and searched its queries; all hold the whole table
        assert torch.equal(torch.load(tmp_path / f"table{rank}.pt"), expected)


def _train_set(n: int = 40) -> ImageSet:
    return ImageSet("fashion_mnist", _images(n), torch.arange(n) % 3, ["a", "b", "c"])


def test_a_signal_during_mining_stops_between_chunks_and_the_resumed_run_mines_again(tmp_path, monkeypatch):
    cfg, data = _cfg(refresh=1), _train_set()
    monkeypatch.setattr(knn_shards, "CPU_BUDGET", 8 * 8 * 40)  # 8 query rows a chunk: 5 chunks per mining
    chunks = []
    real_rows = knn_shards.knn_rows

    def counted(*a):
        chunks.append(a[1])
        return real_rows(*a)

    monkeypatch.setattr(knn_shards, "knn_rows", counted)
    ref = _fresh(cfg)
    history = train_mod.train(ref, data, cfg, seed=5, ckpt=tmp_path / "a.pt")
    assert chunks == [0, 8, 16, 24, 32] * 2  # epochs 0 and 1 (refresh 1)

    def requeue():
        raise Preempted

    def signal_at_chunk_7(*a):  # epoch 1's second chunk: the signal comes while it runs
        out = counted(*a)
        if len(chunks) == 7:
            interrupt._pending = requeue
        return out

    chunks.clear()
    monkeypatch.setattr(knn_shards, "knn_rows", signal_at_chunk_7)
    with pytest.raises(Preempted):
        train_mod.train(_fresh(cfg), data, cfg, seed=5, ckpt=tmp_path / "b.pt")
    assert chunks == [0, 8, 16, 24, 32, 0, 8] and not interrupt.pending()  # stopped before epoch 1's third chunk
    state = torch.load(tmp_path / "b.pt", weights_only=False)
    assert (state["epoch"], state["step"]) == (1, 0) and int(state["method"]["neighbours.epoch"]) == 0

    chunks.clear()
    monkeypatch.setattr(knn_shards, "knn_rows", counted)
    resumed = _fresh(cfg)
    history_b = train_mod.train(resumed, data, cfg, seed=5, ckpt=tmp_path / "b.pt")
    assert chunks == [0, 8, 16, 24, 32]  # epoch 1 mined again, whole
    assert [h["loss"] for h in history_b] == [h["loss"] for h in history]
    assert int(resumed.neighbours.epoch) == 1
    for key, value in ref.state_dict().items():  # the table included
        assert torch.equal(resumed.state_dict()[key], value), key
