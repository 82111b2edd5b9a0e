"""Per-rank draws under DDP (semcl.runtime.distributed.rank_generator, Batch.mixing_generator): on 2 gloo ranks
each rank draws its own CutMix box and mixup lambda from a generator of (seed, epoch, step, rank), the same on a
rerun; with one process the draws stay on the epoch's generator (single-process runs compute as before), and
HSA's CutMix and the MAE fine-tune's mixup take their draws from `Batch.mixing_generator`."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from semcl.data.views.cutmix import cutmix
from semcl.methods.base import Batch
from semcl.runtime import distributed

SEED, EPOCH, STEP = 7, 3, 5
ANCHOR, NEIGHBOUR = torch.zeros(4, 1, 32, 32), torch.ones(4, 1, 32, 32)
LABELS = torch.arange(4)  # distinct, so target[0, 0] is the kept share lambda (smoothing 0)
# (y1, y2, x1, x2) of the first and the second box each rank draws at (7, 3, 5); the first box's kept share
BOXES = {0: ([5, 15, 0, 8], [6, 32, 0, 26]), 1: ([0, 20, 20, 32], [11, 29, 0, 16])}
KEPT = {0: 1 - 10 * 8 / 1024, 1: 1 - 20 * 12 / 1024}
# timm's draw after the two boxes: rank 0 mixes (lambda ~ Beta(0.8, 0.8)), rank 1 pastes a box of 42 of 256 pixels
LAMBDA = {0: 0.11616835, 1: 1 - 42 / 256}


def _seed(rank: int) -> int:
    """The documented rule, written out here: sha256 of "seed/epoch/step/rank", first 8 bytes, 63 bits."""
    return int.from_bytes(hashlib.sha256(f"{SEED}/{EPOCH}/{STEP}/{rank}".encode()).digest()[:8], "little") >> 1


def _mixup_lambda(g: torch.Generator) -> float | None:
    try:
        from semcl.methods.vit.mixup import SeededMixup

        mix = SeededMixup(mixup=0.8, cutmix=1.0, prob=1.0, switch_prob=0.5, smoothing=0.0, num_classes=4)
    except ImportError:  # timm absent: the CutMix half still runs
        return None
    images = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    return float(mix(images, LABELS, g)[1][0, 0])


def _draws(g: torch.Generator) -> dict:
    first, second = cutmix(ANCHOR, NEIGHBOUR, g, alpha=1.0), cutmix(ANCHOR, NEIGHBOUR, g, alpha=1.0)
    return {"boxes": (first.boxes[0].tolist(), second.boxes[0].tolist()), "kept": float(first.lam[0]),
            "lam": _mixup_lambda(g)}


def _worker(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    g = distributed.rank_generator(SEED, EPOCH, STEP)
    epoch_g = torch.Generator().manual_seed(11)
    batch = Batch.of([ANCHOR], LABELS, generator=epoch_g, rank_generator=g)
    torch.save({"draws": _draws(batch.mixing_generator), "seed": g.initial_seed(),
                "epoch_untouched": torch.equal(epoch_g.get_state(), torch.Generator().manual_seed(11).get_state())},
               f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def _spawn(folder) -> dict[int, dict]:
    folder.mkdir()
    mp.spawn(_worker, args=(f"file://{folder}/init", str(folder)), nprocs=2, join=True)
    return {r: torch.load(folder / f"rank{r}.pt") for r in (0, 1)}


def test_two_ranks_draw_their_own_box_and_lambda_the_same_on_rerun(tmp_path):
    first, again = _spawn(tmp_path / "a"), _spawn(tmp_path / "b")
    assert first == again  # a rerun draws exactly the same per rank
    for rank in (0, 1):
        got = first[rank]
        assert got["seed"] == _seed(rank) and got["epoch_untouched"]
        assert got["draws"]["boxes"] == BOXES[rank]
        assert got["draws"]["kept"] == KEPT[rank]
        # the same draws as a generator seeded by the rule in this process
        assert got["draws"] == _draws(torch.Generator().manual_seed(_seed(rank)))
    assert first[0]["draws"]["boxes"][0] != first[1]["draws"]["boxes"][0]
    if first[0]["draws"]["lam"] is not None:
        assert first[0]["draws"]["lam"] == pytest.approx(LAMBDA[0], abs=1e-7)
        assert first[1]["draws"]["lam"] == LAMBDA[1]


def test_one_process_keeps_the_epoch_generator():
    assert distributed.rank_generator(SEED, EPOCH, STEP) is None
    g = torch.Generator().manual_seed(4)
    batch = Batch.of([ANCHOR], LABELS, generator=g)
    assert batch.mixing_generator is g  # single-process runs draw exactly as before
    own = torch.Generator().manual_seed(5)
    assert Batch.of([ANCHOR], LABELS, generator=g, rank_generator=own).mixing_generator is own


def test_rank_step_seed_is_the_documented_hash():
    assert distributed.rank_step_seed(SEED, EPOCH, STEP, 0) == _seed(0) == 2916926433345504384
    assert distributed.rank_step_seed(SEED, EPOCH, STEP, 1) == _seed(1) == 9014279118881143076
    assert distributed.rank_step_seed(SEED, EPOCH, STEP + 1, 0) != _seed(0)
