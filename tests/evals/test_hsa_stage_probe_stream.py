"""Per-stage probes trained on the fly (the official main_lincls.py way) equal the cached-feature probes on
the same view; the protocol streams when the cache would be too large and resumes from its checkpoint; the
memory the probes need; the stem probe reads the max-pooled stem map (official ending point 1)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from semcl.data import ImageSet
from semcl.evals import stage_probe as sp
from semcl.evals.protocols import stage_probe as protocol
from semcl.evals.protocols.context import EvalContext
from semcl.evals.stage_pooling import pooled_stage_features
from semcl.models import build_backbone
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _to_float(images, generator):
    return images.float() / 255.0


def _stage_fn(x):  # per-sample arithmetic only: a batch's features do not depend on the batch they sit in
    return {"stem": x.mean(dim=(2, 3)), "layer1": x.flatten(1)}


def _data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 2, 2), generator=g, dtype=torch.uint8), torch.randint(0, 4, (n,), generator=g)


ARGS = dict(dims={"stem": 3, "layer1": 12}, num_classes=4, epochs=3, lr=0.5, batch_size=7, momentum=0.9,
            weight_decay=1e-3, milestones=(2,), gamma=0.1, seed=5)


def test_streaming_probes_equal_the_cached_probes():
    (xtr, ytr), (xte, yte) = _data(30, 0), _data(11, 1)
    cached = sp.train_stage_probes(
        sp.CachedFeatures(sp.stage_feature_table(_stage_fn, xtr, _to_float, ["stem", "layer1"], batch_size=4)), ytr,
        sp.CachedFeatures(sp.stage_feature_table(_stage_fn, xte, _to_float, ["stem", "layer1"], batch_size=4)), yte,
        **ARGS)
    streamed = sp.train_stage_probes(sp.StreamingFeatures(_stage_fn, xtr, _to_float, ["stem", "layer1"]), ytr,
                                     sp.StreamingFeatures(_stage_fn, xte, _to_float, ["stem", "layer1"]), yte, **ARGS)
    assert cached == streamed and set(cached) == {"stem", "layer1"}
    # each stage's probe is the single-probe arithmetic: with one stage it is probe_on_features
    one = sp.probe_on_features(_to_float(xtr, None).flatten(1), ytr, _to_float(xte, None).flatten(1), yte,
                               **{k: v for k, v in ARGS.items() if k != "dims"})
    assert one == sp.train_stage_probes(sp.StreamingFeatures(_stage_fn, xtr, _to_float, ["layer1"]), ytr,
                                        sp.StreamingFeatures(_stage_fn, xte, _to_float, ["layer1"]), yte,
                                        **{**ARGS, "dims": {"layer1": 12}})["layer1"]


class _Memory:
    """An in-memory EvalCheckpoint that keeps a copy of every saved state (the real one writes a file)."""

    def __init__(self, path, state=None):
        self.path, self.state, self.saved = path, state, []

    def load(self):
        return self.state

    def save(self, state):
        self.saved.append(copy.deepcopy(state))


def test_a_resumed_probe_ends_where_the_uninterrupted_one_does(tmp_path):
    (xtr, ytr), (xte, yte) = _data(30, 0), _data(11, 1)

    def src(x):  # with a random transform, so the resumed generator state matters
        return sp.StreamingFeatures(_stage_fn, x, lambda im, g: _to_float(im, g) + 0.1 * torch.rand(im.shape, generator=g),
                                    ["stem", "layer1"])

    ck = _Memory(tmp_path / "eval-stage_probe.pt")
    full = sp.train_stage_probes(src(xtr), ytr, src(xte), yte, **ARGS, checkpoint=ck)
    assert [s["epoch"] for s in ck.saved] == [1, 2]  # after each epoch but the last
    resumed = sp.train_stage_probes(src(xtr), ytr, src(xte), yte, **ARGS, checkpoint=_Memory(ck.path, ck.saved[0]))
    assert resumed == full


def test_memory_of_the_paper_probes():
    # ResNet-50 at 224 px, the official pooling: 140,032 inputs a sample over the five stages
    dims = {"stem": 64 * 196, "layer1": 256 * 196, "layer2": 512 * 49, "layer3": 1024 * 49, "layer4": 2048}
    assert sum(dims.values()) == 140_032
    # the cache the old path held for ImageNet (1,281,167 + 50,000 images): ~694 GiB, far above the limit
    assert sp.cache_bytes(dims, 1_331_167) == 1_331_167 * 140_032 * 4 and not sp.cache_fits(dims, 1_331_167)
    # on the fly: 1000-way heads (weight, gradient, momentum) + one batch of 256: ~1.7 GiB
    want = 4 * (3 * (140_032 + 5) * 1000 + 256 * (140_032 + 2 * 1000 * 5))
    assert sp.probe_device_bytes(dims, 1000, 256) == want and 1.6 < want / 2**30 < 1.8


def _ctx(tmp_path, augment: bool):
    cfg = build_config({"method": {"name": "ce"}, "model": {"backbone": "resnet_tiny"}, "data": {"name": "cifar100"},
                        "probe": {"epochs": 2, "lr": 0.5, "batch_size": 8, "milestones": [1], "augment": augment},
                        "eval": {"stage_probe": ["stem", "layer2"]}}, where="test")
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    backbone = build_backbone("resnet_tiny", in_channels=3).eval()
    method = SimpleNamespace(parameters=backbone.parameters,
                             stage_features=lambda x: pooled_stage_features(backbone, x, stages=["stem", "layer2"]))

    def split(n):
        return ImageSet("cifar100", torch.randint(0, 256, (n, 3, 8, 8), generator=g, dtype=torch.uint8),
                        torch.arange(n) % 3, ["a", "b", "c"])

    return EvalContext(method, cfg, split(20), split(9), None, 3, checkpoint_dir=tmp_path)


def test_protocol_streams_past_the_cache_limit_with_the_same_numbers(tmp_path, monkeypatch):
    cached = protocol.run(_ctx(tmp_path / "a", augment=False))
    monkeypatch.setattr(sp, "CACHE_LIMIT_BYTES", 0)
    assert protocol.run(_ctx(tmp_path / "b", augment=False)) == cached
    assert set(cached) == {"stage_probe_top1_stem", "stage_probe_top1_layer2"}
    # with augmentation (the paper profile) it streams the probe recipe's crops and still gives numbers
    aug = protocol.run(_ctx(tmp_path / "c", augment=True))
    assert set(aug) == set(cached) and all(0 <= v <= 100 for v in aug.values())


def test_stem_probe_reads_the_max_pooled_stem():
    backbone = build_backbone("resnet18", in_channels=3).eval()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        stem = backbone.maxpool(backbone.relu(backbone.bn1(backbone.conv1(x))))  # 16 x 16 at 64 px (56 at 224)
        want = torch.nn.functional.adaptive_avg_pool2d(stem, 14).flatten(1)
    torch.testing.assert_close(pooled_stage_features(backbone, x, stages=["stem"])["stem"], want, rtol=0, atol=0)


def test_probe_gpu_bytes_counts_state_stage_maps_and_heads():
    class Method(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = build_backbone("resnet_tiny", in_channels=3)

        def stage_features(self, x):
            return pooled_stage_features(self.backbone, x, stages=["stem", "layer2"])

    m = Method().eval()
    state = sum(t.numel() * t.element_size() for t in m.state_dict().values())
    maps = 16 * 32 * 32 + 16 * 32 * 32 + 32 * 16 * 16 + 64 * 8 * 8  # stem, layer1..3 of resnet_tiny at 32 px
    dims = {"stem": 16 * 14 * 14, "layer2": 32 * 7 * 7}
    got = sp.probe_gpu_bytes(m, torch.zeros(1, 3, 32, 32), 10, 64)
    assert got == state + 4 * maps * 64 + sp.probe_device_bytes(dims, 10, 64)
