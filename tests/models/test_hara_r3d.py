"""Hara et al.'s 3D-ResNet-18 (semcl.models.hara_r3d): feature-map shapes and parameter counts against
figures computed by hand from the layout, and the registry's default video backbone."""

from __future__ import annotations

import pytest
import torch

from semcl.models.video import build_video_backbone
from semcl.registry.tables import get_table

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _basic_block(cin: int, cout: int) -> int:
    """Two 3x3x3 convolutions (no bias) and two BNs (weight + bias each)."""
    return 27 * cin * cout + 27 * cout * cout + 4 * cout


# stem: 7x7x7 conv 3 -> 64 + BN; then [2, 2, 2, 2] BasicBlocks at 64, 128, 256, 512 channels
HAND_A = (343 * 3 * 64 + 2 * 64
          + 2 * _basic_block(64, 64)
          + _basic_block(64, 128) + _basic_block(128, 128)
          + _basic_block(128, 256) + _basic_block(256, 256)
          + _basic_block(256, 512) + _basic_block(512, 512))
# type B adds a 1x1x1 conv + BN at the three downsampling blocks
HAND_B = HAND_A + (64 * 128 + 256) + (128 * 256 + 512) + (256 * 512 + 1024)


def test_parameter_counts_match_the_hand_computed_figures():
    assert HAND_A == 33_030_080 and HAND_B == 33_203_904
    for name, expect in (("hara_r3d18", HAND_A), ("hara_r3d18_b", HAND_B)):
        net = build_video_backbone(name)
        assert sum(p.numel() for p in net.parameters()) == expect, name
        assert net.out_dim == 512


def test_feature_map_shapes_follow_the_stem_and_max_pool():
    net = build_video_backbone("hara_r3d18").eval()
    x = torch.randn(2, 3, 16, 32, 32)
    with torch.no_grad():
        maps = net.feature_maps(x)
        out = net(x)
    # conv1 stride (1, 2, 2): 16x16x16, max-pool stride 2: 8x8x8, then layers 2-4 halve T, H, W
    assert [tuple(m.shape[1:]) for m in maps] == [(64, 8, 8, 8), (64, 8, 8, 8), (128, 4, 4, 4),
                                                 (256, 2, 2, 2), (512, 1, 1, 1)]
    assert out.shape == (2, 512)
    torch.testing.assert_close(out, maps[-1].mean(dim=(2, 3, 4)))


def test_type_a_shortcut_is_a_strided_zero_padded_identity():
    block = build_video_backbone("hara_r3d18").layer2[0]
    x = torch.randn(1, 64, 4, 6, 6)
    y = block._shortcut(x)
    assert y.shape == (1, 128, 2, 3, 3)
    torch.testing.assert_close(y[:, :64], x[:, :, ::2, ::2, ::2], rtol=0, atol=0)
    assert (y[:, 64:] == 0).all()


def test_tab4_paper_rows_train_hara_and_keep_torchvision_as_a_variant():
    t = get_table("rince/tab4")
    assert t.resolve(t.row("RINCE"), "paper").method.backbone == "hara_r3d18"
    assert t.resolve(t.row("RINCE UCF101 fine-tune"), "paper").method.backbone == "hara_r3d18"
    assert t.resolve(t.row("RINCE (torchvision r3d_18)"), "paper").method.backbone == "r3d_18"
    assert t.resolve(t.row("RINCE (torchvision r3d_18) UCF101 fine-tune"), "paper").method.backbone == "r3d_18"
    assert t.resolve(t.row("RINCE"), "mini").method.backbone == "r3d_small"
