"""Backbones: output shapes, exact parameter counts, CIFAR stem, init options."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semcl.models import BACKBONES, build_backbone


def _n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _conv(cin: int, cout: int, k: int, groups: int = 1) -> int:
    return cin // groups * cout * k * k  # bias-free conv


def _bn(c: int) -> int:
    return 2 * c  # weight + bias (running stats are buffers)


def _cifar_resnet_count(block: str, blocks, widths, stem: int, in_ch: int) -> int:
    """Parameter count of a CIFAR ResNet from the layer formulas, stage by stage."""
    total = _conv(in_ch, stem, 3) + _bn(stem)
    expansion = 4 if block == "bottleneck" else 1
    in_planes = stem
    for stage, (n, w) in enumerate(zip(blocks, widths, strict=True)):
        for j in range(n):
            out = w * expansion
            if block == "bottleneck":
                total += _conv(in_planes, w, 1) + _bn(w)
                total += _conv(w, w, 3) + _bn(w)
                total += _conv(w, out, 1) + _bn(out)
            else:
                total += _conv(in_planes, w, 3) + _bn(w) + _conv(w, w, 3) + _bn(w)
            stride = 2 if (stage > 0 and j == 0) else 1
            if stride != 1 or in_planes != out:
                total += _conv(in_planes, out, 1) + _bn(out)
            in_planes = out
    return total


@pytest.mark.parametrize("in_ch", [1, 3])
@pytest.mark.parametrize(
    ("name", "size", "dim"),
    [("resnet50_cifar", 32, 2048), ("resnet18_cifar", 32, 512), ("resnet_tiny", 28, 64)],
)
def test_cifar_backbone_shapes(name: str, size: int, dim: int, in_ch: int) -> None:
    torch.manual_seed(0)
    model = build_backbone(name, in_channels=in_ch)
    assert model.out_dim == dim
    out = model(torch.randn(2, in_ch, size, size))
    assert out.shape == (2, dim)
    assert torch.isfinite(out).all()


def test_resnet50_cifar_param_count() -> None:
    model = build_backbone("resnet50_cifar")
    formula = _cifar_resnet_count("bottleneck", (3, 4, 6, 3), (64, 128, 256, 512), 64, 3)
    assert formula == 23_500_352
    assert _n_params(model) == 23_500_352
    # torchvision's resnet50 without fc is 23,508,032; the only difference is the
    # 7x7 vs 3x3 stem conv: 64 * 3 * (49 - 9) = 7,680.
    assert 23_508_032 - _n_params(model) == 64 * 3 * (49 - 9)
    one_ch = build_backbone("resnet50_cifar", in_channels=1)
    assert _n_params(one_ch) == 23_500_352 - 64 * 2 * 9


def test_resnet_tiny_param_count() -> None:
    for in_ch, expected in [(3, 77_392), (1, 77_104)]:
        model = build_backbone("resnet_tiny", in_channels=in_ch)
        assert _cifar_resnet_count("basic", (1, 1, 1), (16, 32, 64), 16, in_ch) == expected
        assert _n_params(model) == expected


def test_resnet18_cifar_param_count() -> None:
    model = build_backbone("resnet18_cifar")
    formula = _cifar_resnet_count("basic", (2, 2, 2, 2), (64, 128, 256, 512), 64, 3)
    assert _n_params(model) == formula == 11_168_832


@pytest.mark.parametrize("name", ["resnet50_cifar", "resnet18_cifar", "resnet_tiny"])
def test_cifar_stem_has_no_maxpool(name: str) -> None:
    model = build_backbone(name)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    assert model.conv1.kernel_size == (3, 3)
    assert model.conv1.stride == (1, 1)
    stem = nn.Sequential(model.conv1, model.bn1, model.relu)
    assert stem(torch.randn(1, 3, 32, 32)).shape[-2:] == (32, 32)


def test_resnet_tiny_small_inputs() -> None:
    model = build_backbone("resnet_tiny").eval()
    for size in (8, 13, 64):
        assert model(torch.randn(1, 3, size, size)).shape == (1, 64)


def test_init_and_zero_init_residual() -> None:
    torch.manual_seed(0)
    model = build_backbone("resnet18_cifar")
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(torch.equal(b.weight, torch.ones_like(b.weight)) for b in bns)
    assert all(torch.equal(b.bias, torch.zeros_like(b.bias)) for b in bns)
    # Kaiming normal, fan_out: std = sqrt(2 / (out_channels * k * k)).
    w = model.layer4[0].conv2.weight
    assert w.std().item() == pytest.approx((2 / (512 * 9)) ** 0.5, rel=0.02)

    zeroed = build_backbone("resnet50_cifar", zero_init_residual=True)
    for stage in (zeroed.layer1, zeroed.layer2, zeroed.layer3, zeroed.layer4):
        for block in stage:
            assert torch.count_nonzero(block.bn3.weight) == 0
            assert torch.count_nonzero(block.bn1.weight) == block.bn1.weight.numel()


def test_channels_last_matches_contiguous() -> None:
    torch.manual_seed(0)
    model = build_backbone("resnet_tiny").eval()
    x = torch.randn(4, 3, 28, 28)
    ref = model(x)
    cl_model = model.to(memory_format=torch.channels_last)
    out = cl_model(x.to(memory_format=torch.channels_last))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "dim"),
    [
        ("resnet18", 512),
        ("resnet50", 2048),
        ("resnet101", 2048),
        ("resnet152", 2048),
        ("resnext50_32x4d", 2048),
        ("resnext101_32x4d", 2048),
    ],
)
def test_imagenet_backbones(name: str, dim: int) -> None:
    model = build_backbone(name)
    assert model.out_dim == dim
    assert isinstance(model.fc, nn.Identity)
    assert model.conv1.kernel_size == (7, 7)


def test_imagenet_forward_and_channels() -> None:
    model = build_backbone("resnet18", in_channels=1).eval()
    assert model.conv1.in_channels == 1
    assert model(torch.randn(2, 1, 64, 64)).shape == (2, 512)


def test_resnext101_32x4d_param_count() -> None:
    # 44,177,704 with the 1000-way fc (fc = 2048 * 1000 + 1000) agrees with the
    # commonly quoted 44.18M for ResNeXt-101 32x4d.
    assert _n_params(build_backbone("resnext101_32x4d")) == 44_177_704 - 2_049_000


def test_unknown_backbone_lists_known() -> None:
    with pytest.raises(ValueError, match=r"unknown backbone 'vgg'; known: .*resnet_tiny"):
        build_backbone("vgg")
    assert set(BACKBONES) >= {"resnet50_cifar", "resnet18_cifar", "resnet_tiny"}
