"""Per-stage feature maps, companion heads and probe pooling on ResNet-50 (shapes on the meta device)
and on resnet_tiny (real tensors)."""

from __future__ import annotations

import pytest
import torch

from semcl.evals.stage_pooling import pool_map, pooled_stage_features, probe_dims, probe_pool_sizes
from semcl.models.backbones import build_backbone
from semcl.models.stage_heads import StageHead, apply_stage_heads, build_stage_heads
from semcl.models.stages import stage_channels, stage_names, stage_outputs

R50_MAPS = {"stem": (64, 112, 112), "layer1": (256, 56, 56), "layer2": (512, 28, 28),
            "layer3": (1024, 14, 14), "layer4": (2048, 7, 7)}
TINY_MAPS = {"stem": (16, 32, 32), "layer1": (16, 32, 32), "layer2": (32, 16, 16), "layer3": (64, 8, 8)}


@pytest.fixture(scope="module")
def r50_meta():
    # the meta device gives every shape of a 224-px ResNet-50 pass without allocating or computing
    with torch.device("meta"):
        return build_backbone("resnet50")


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return build_backbone("resnet_tiny").eval()


def test_resnet50_stage_maps_and_channels(r50_meta):
    outs = stage_outputs(r50_meta, torch.empty(2, 3, 224, 224, device="meta"))
    assert {k: tuple(v.shape[1:]) for k, v in outs.items()} == R50_MAPS
    assert stage_channels(r50_meta) == {k: c for k, (c, _, _) in R50_MAPS.items()}
    assert list(stage_outputs(r50_meta, torch.empty(1, 3, 224, 224, device="meta"), upto="layer2")) == \
        ["stem", "layer1", "layer2"]


def test_tiny_stage_maps_and_the_last_one_pools_to_the_backbone_output(tiny):
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    outs = stage_outputs(tiny, x)
    assert {k: tuple(v.shape[1:]) for k, v in outs.items()} == TINY_MAPS
    assert stage_channels(tiny) == {k: c for k, (c, _, _) in TINY_MAPS.items()}
    assert torch.equal(outs["layer3"].mean(dim=(2, 3)), tiny(x))


def test_companion_heads_shapes(r50_meta, tiny):
    with torch.device("meta"):
        heads = build_stage_heads(r50_meta)                    # layer2 + layer3, the paper's stages
    outs = stage_outputs(r50_meta, torch.empty(2, 3, 224, 224, device="meta"), upto="layer3")
    emb = apply_stage_heads(heads, outs)
    assert {k: tuple(v.shape) for k, v in emb.items()} == {"layer2": (2, 128), "layer3": (2, 128)}
    assert heads["layer2"].block.conv1.weight.shape == (128, 512, 1, 1)      # 512 -> 128 -> 128 -> 512
    assert heads["layer3"].block.conv2.weight.shape == (256, 256, 3, 3)
    assert heads["layer3"].mlp.net[0].weight.shape == (1024, 1024)

    tiny_heads = build_stage_heads(tiny, ("layer2", "layer3"), out_dim=128)
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    emb = apply_stage_heads(tiny_heads, stage_outputs(tiny, x))
    assert {k: tuple(v.shape) for k, v in emb.items()} == {"layer2": (4, 128), "layer3": (4, 128)}
    assert torch.allclose(emb["layer2"].norm(dim=1), torch.ones(4, dtype=torch.float32))


def test_stage_head_rejects_bad_stages(tiny):
    with pytest.raises(ValueError, match="layer4"):
        build_stage_heads(tiny, ("layer2", "layer4"))
    with pytest.raises(ValueError, match="divisible by 4"):
        StageHead(30)
    with pytest.raises(ValueError, match="ResNet backbone"):
        stage_names(torch.nn.Linear(2, 2))


def test_probe_dims_follow_the_official_pooling(r50_meta, tiny):
    want_r50 = {"stem": 64 * 196, "layer1": 256 * 196, "layer2": 512 * 49, "layer3": 1024 * 49, "layer4": 2048}
    assert probe_dims(r50_meta) == want_r50
    feats = pooled_stage_features(r50_meta, torch.empty(2, 3, 224, 224, device="meta"))
    assert {k: tuple(v.shape) for k, v in feats.items()} == {k: (2, d) for k, d in want_r50.items()}
    # resnet_tiny: same grid by name, its last stage (layer3) global-pooled
    assert probe_pool_sizes(stage_names(tiny)) == {"stem": 14, "layer1": 14, "layer2": 7, "layer3": 1}
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    feats = pooled_stage_features(tiny, x, stages=["layer2", "layer3"])
    assert {k: v.shape[1] for k, v in feats.items()} == {"layer2": 32 * 49, "layer3": 64}
    assert torch.equal(feats["layer3"], tiny(x))


def test_pool_map_by_hand():
    x = torch.arange(16.0).view(1, 1, 4, 4)
    # 2x2 average of the four 2x2 blocks; max of each block
    assert pool_map(x, 2).tolist() == [[2.5, 4.5, 10.5, 12.5]]
    assert pool_map(x, 2, "max").tolist() == [[5.0, 7.0, 13.0, 15.0]]
    assert pool_map(x, 1).tolist() == [[7.5]]
