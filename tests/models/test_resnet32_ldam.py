"""resnet32_ldam is the LDAM-DRW / PaCo CIFAR ResNet-32 (PCL PaCo/LT/models/resnet_cifar.py): option-A
zero-padding shortcuts, fan_in Kaiming-normal convs, 0.46M parameters."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from semcl.models.backbones import BasicBlock, PadShortcut, build_backbone


def test_parameter_count_is_the_official_resnet32s():
    # convs: stem 3*16*9 + layer1 10*16*16*9 + layer2 (16*32 + 9*32*32)*9 + layer3 (32*64 + 9*64*64)*9 = 461,232;
    # BN: 2 * (16 + 10*16 + 10*32 + 10*64) = 2,272; the official count with its 10-class fc (650) is 464,154
    net = build_backbone("resnet32_ldam")
    assert sum(p.numel() for p in net.parameters()) == 461_232 + 2_272 == 464_154 - 650
    assert net.out_dim == 64
    projection = build_backbone("resnet32_cifar")  # the variant: two 1x1 conv + BN projections more
    assert sum(p.numel() for p in projection.parameters()) == 463_504 + (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)


def test_pad_shortcut_subsamples_and_zero_pads_channels():
    x = torch.arange(2 * 16, dtype=torch.float32).view(1, 2, 4, 4)
    out = PadShortcut(4)(x)  # planes 4: one zero channel on each side
    assert out.shape == (1, 4, 2, 2)
    assert torch.equal(out[:, 1:3], x[:, :, ::2, ::2])
    assert not out[:, 0].any() and not out[:, 3].any()


def test_a_downsampling_block_is_the_official_formula():
    torch.manual_seed(0)
    block = BasicBlock(4, 8, 2, pad_shortcut=True).eval().double()
    x = torch.randn(2, 4, 6, 6, dtype=torch.float64)

    def bn(t, m):
        return F.batch_norm(t, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)

    h = F.relu(bn(F.conv2d(x, block.conv1.weight, stride=2, padding=1), block.bn1))
    h = bn(F.conv2d(h, block.conv2.weight, padding=1), block.bn2)
    want = F.relu(h + F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, 2, 2)))
    assert torch.allclose(block(x), want, atol=1e-12)


def test_convs_are_fan_in_kaiming_normal():
    torch.manual_seed(0)
    stem = build_backbone("resnet32_ldam").conv1.weight  # fan_in 27, fan_out 144
    assert math.isclose(float(stem.detach().std()), math.sqrt(2 / 27), rel_tol=0.1)
    torch.manual_seed(0)
    assert math.isclose(float(build_backbone("resnet32_cifar").conv1.weight.detach().std()), math.sqrt(2 / 144), rel_tol=0.1)
