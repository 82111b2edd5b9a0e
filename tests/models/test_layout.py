"""model.memory_format: channels-last conv weights change the speed, not the function."""

import copy

import pytest
import torch

from semcl.errors import ConfigError
from semcl.models.backbones import resnet_tiny
from semcl.models.layout import apply_memory_format
from semcl.models.video import SmallR3D
from semcl.run_config import build_config


def _pair(build, seed=0):
    torch.manual_seed(seed)
    plain = build()
    return plain, apply_memory_format(copy.deepcopy(plain), "channels_last")


@pytest.mark.parametrize("build,shape,fmt", [
    (lambda: resnet_tiny(in_channels=3), (6, 3, 20, 20), torch.channels_last),
    (lambda: resnet_tiny(in_channels=1), (6, 1, 20, 20), torch.channels_last),
    (SmallR3D, (4, 3, 8, 32, 32), torch.channels_last_3d),
])
def test_channels_last_weights_give_the_same_outputs_and_gradients(build, shape, fmt):
    plain, cl = _pair(build)
    convs = [p for p in cl.parameters() if p.dim() == len(shape)]
    assert convs and all(p.is_contiguous(memory_format=fmt) for p in convs)
    assert not all(p.is_contiguous() for p in convs)  # really moved (1x1 kernels are both)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    out_p, out_c = plain(x), cl(x)
    # float32 sums in another order: compared by relative norm (elementwise, cancellation is noisy)
    assert (out_c - out_p).norm() <= 1e-5 * out_p.norm()
    w = torch.randn(out_p.shape, generator=torch.Generator().manual_seed(2))  # not |out|^2: BN makes it flat
    (out_p * w).sum().backward()
    (out_c * w).sum().backward()
    # gradients against a float64 copy of the default layout: behind BN the stem's weight gradient is a sum
    # with heavy cancellation (float32 error ~3e-3 relative for the 3-D net on some CPUs, in both layouts), so
    # channels-last must be as close to the float64 truth as the default layout is, not within a fixed 1e-4
    ref = copy.deepcopy(plain).double()
    for p in ref.parameters():
        p.grad = None
    (ref(x.double()) * w.double()).sum().backward()
    for (name, a), (_, b), (_, r) in zip(plain.named_parameters(), cl.named_parameters(), ref.named_parameters(),
                                         strict=True):
        err_plain, err_cl = ((g.grad.double() - r.grad).norm() for g in (a, b))
        assert err_cl <= max(2 * err_plain, 1e-5 * r.grad.norm()), name
        assert err_plain <= 1e-2 * r.grad.norm(), name  # float32 itself stays close to the truth


def test_checkpoints_move_between_layouts_unchanged():
    plain, cl = _pair(lambda: resnet_tiny(in_channels=3))
    for p in cl.parameters():
        p.data.add_(0.01)  # make the two differ, then copy one into the other
    fresh = resnet_tiny(in_channels=3)
    fresh.load_state_dict(cl.state_dict())
    back = apply_memory_format(resnet_tiny(in_channels=3), "channels_last")
    back.load_state_dict(fresh.state_dict())
    for a, b, c in zip(cl.state_dict().values(), fresh.state_dict().values(), back.state_dict().values(),
                       strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert all(p.is_contiguous(memory_format=torch.channels_last) for p in back.parameters() if p.dim() == 4)


def test_none_leaves_the_module_alone_and_unknown_names_fail():
    m = resnet_tiny()
    assert apply_memory_format(m, None) is m and all(p.is_contiguous() for p in m.parameters())
    with pytest.raises(ValueError, match="unknown memory format 'nhwc'"):
        apply_memory_format(m, "nhwc")
    with pytest.raises(ConfigError, match="model.memory_format"):
        build_config({"model": {"memory_format": "nhwc"}}, where="x.yaml")
    assert build_config({"model": {"memory_format": "channels_last"}}, where="x").model.memory_format == "channels_last"
