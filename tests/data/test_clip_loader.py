"""Video views through the clip loader (plan here, decode in workers, finish on the device) are the views
`make_views` makes in the training step, bit for bit, and leave the epoch generator where it leaves it.

Set: the synthetic UCF101 stand-in in both real layouts (JPEG frame folders, MPEG-4 .avi), frames resized
on decode as the engine's sets are. The device is the CPU here: `finish_views` runs where the engine
trains, and pin_memory / non_blocking apply on CUDA only (the device check is bench/bench_video.py's).
"""

from __future__ import annotations

import pytest
import torch
from video_augment_oracle import augment_before_split

from semcl.data.video import ClipAugment, VideoSet, load_video_split, write_synthetic_video
from semcl.data.views.augment import RECIPES
from semcl.data.views.clip_loader import ClipLoader
from semcl.methods.base import DataInfo
from semcl.methods.registry import method_class
from semcl.registry.tables import get_table
from semcl.runtime import distributed

BATCH, STEPS = 4, 3  # 12 training videos: three steps of four


@pytest.fixture(scope="module")
def video_root(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("clips")
    # lengths 12..60: some videos are shorter than the x_v distance (the sampler's fallback) or one span
    write_synthetic_video("ucf101", root, num_classes=2, train_per_class=6, test_per_class=1, frames=(12, 60),
                          size=(16, 22), seed=3)
    return root


def _set(root, layout: str) -> VideoSet:
    return load_video_split("ucf101", root, "train", layout=layout, frame_size=(16, 21))  # the engine's 4:3 resize


def _method(row: str):
    table = get_table("rince/tab4")
    cfg = table.resolve(table.row(row), "smoke")
    torch.manual_seed(0)
    return method_class(cfg.method.name)(cfg, DataInfo(2, 3, None))


def _reference(method, train_set, seed: int):
    """Today's path: make_views per step on the epoch generator; the views and the state after each step."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(train_set), generator=g)
    views, states, gaps = [], [], []
    for s in range(STEPS):
        views.append(method.make_views(train_set, order[s * BATCH:(s + 1) * BATCH], g, []))
        states.append(g.get_state())
        # the x_v placements by video index (True beyond the batch's videos); a fine-tune draws none
        gaps.append(method._gap_ok.clone() if hasattr(method, "_gap_ok") else None)
    return order, views, states, gaps


def _epoch(loader, method, seed: int, part: slice = slice(None)):
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(loader.train_set), generator=g)
    return g, loader.epoch(method, [], g, order, BATCH, range(STEPS), part, torch.device("cpu"))


@pytest.mark.parametrize("layout", ["frames", "videos"])
@pytest.mark.parametrize("row", ["RINCE", "RINCE UCF101 fine-tune"])
def test_views_through_two_workers_equal_make_views(video_root, layout, row) -> None:
    train_set = _set(video_root, layout)
    method, reference = _method(row), _method(row)
    loader = ClipLoader(train_set, method.decode_plan, workers=2)
    pre_training = row == "RINCE"
    for epoch_seed in (11, 12):  # two epochs on the same (persistent) workers
        _, want, states, gaps = _reference(reference, train_set, epoch_seed)
        g, feed = _epoch(loader, method, epoch_seed)
        for s in range(STEPS):
            views = next(feed)
            assert len(views) == (4 if pre_training else 1)
            assert all(torch.equal(a, b) for a, b in zip(views, want[s], strict=True)), (epoch_seed, s)
            # the checkpoint's generator after step s: today's state after step s
            assert torch.equal(feed.generator_at(s + 1).get_state(), states[s])
            if pre_training:
                assert torch.equal(method._gap_ok, gaps[s])
        assert torch.equal(g.get_state(), states[-1])  # all plans drawn: the epoch stream ends where it did
        with pytest.raises(StopIteration):
            next(feed)
    assert loader._data._iterator is not None and loader._data._iterator._workers[0].is_alive()  # persistent
    loader.close()


def test_plans_run_ahead_but_the_checkpoint_state_is_the_steps(video_root) -> None:
    """With workers the loader draws later steps' plans before step 0 trains; generator_at still gives the
    state of the step being trained, and a run restarted from it (a resume at step 1) sees the same views."""
    train_set = _set(video_root, "frames")
    method = _method("RINCE")
    _, want, states, _ = _reference(_method("RINCE"), train_set, 5)
    loader = ClipLoader(train_set, method.decode_plan, workers=2)
    g, feed = _epoch(loader, method, 5)
    next(feed)
    assert feed._drawn[0] == STEPS - 1  # 2 workers x 2 steps ahead: every plan of the epoch is drawn
    resume = feed.generator_at(1)
    assert torch.equal(resume.get_state(), states[0]) and not torch.equal(g.get_state(), states[0])
    order = torch.randperm(len(train_set), generator=torch.Generator().manual_seed(5))
    again = loader.epoch(_method("RINCE"), [], resume, order, BATCH, range(1, STEPS), slice(None), torch.device("cpu"))
    for s in range(1, STEPS):
        assert all(torch.equal(a, b) for a, b in zip(next(again), want[s], strict=True))
    loader.close()


def test_two_ranks_decode_only_their_half(video_root, monkeypatch) -> None:
    train_set = _set(video_root, "videos")
    order, want, states, gaps = _reference(_method("RINCE"), train_set, 7)
    read: list[int] = []
    real_read = VideoSet.read_frames
    monkeypatch.setattr(VideoSet, "read_frames", lambda self, i, idx: read.append(i) or real_read(self, i, idx))
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    for rank in (0, 1):
        monkeypatch.setattr(distributed, "rank", lambda rank=rank: rank)
        part = distributed.local_slice(BATCH)
        assert part == slice(2 * rank, 2 * rank + 2)
        method = _method("RINCE")
        loader = ClipLoader(train_set, method.decode_plan, workers=0)  # in process, where the spy sees it
        _, feed = _epoch(loader, method, 7, part)
        for s in range(STEPS):
            read.clear()
            views = next(feed)
            mine = order[s * BATCH:(s + 1) * BATCH][part].tolist()
            assert read == mine  # each of this rank's videos opened once, no other video
            assert all(v.shape[0] == 2 and torch.equal(v, w[part]) for v, w in zip(views, want[s], strict=True))
            # this rank's videos hold the placements the whole batch drew; the table ends at its own last video
            assert len(method._gap_ok) == max(mine) + 1
            assert [bool(method._gap_ok[i]) for i in mine] == [bool(gaps[s][i]) for i in mine]
            assert bool(method._gap_ok[[i for i in range(max(mine) + 1) if i not in mine]].all())
            assert torch.equal(feed.generator_at(s + 1).get_state(), states[s])  # every rank draws the whole plan


def test_split_augmentation_equals_the_one_call_form() -> None:
    """draw then apply then normalise: the tensors and the generator state of the former interleaved form."""
    clips = torch.randint(0, 256, (6, 3, 5, 20, 26), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    for recipe in (RECIPES["supcon"], RECIPES["crop_flip"]):
        aug = ClipAugment(recipe, size=12, mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))
        g, old = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        params = aug.draw(6, 20, 26, g)
        assert torch.equal(aug.normalise(aug.apply(clips, params)), augment_before_split(aug, clips, old))
        assert torch.equal(g.get_state(), old.get_state())
        # a slice of the draws on a slice of the clips: the slice of the whole batch's views
        whole = aug.apply(clips, params)
        assert torch.equal(aug.apply(clips[3:], params.part(slice(3, None))), whole[3:])
    with pytest.raises(ValueError, match=r"drawn for 6 clips of \(20, 26\), applied to 6 of \(20, 24\)"):
        aug.apply(clips[..., :24], params)
