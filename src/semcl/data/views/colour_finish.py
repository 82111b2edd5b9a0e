"""The batched finish of a split colour view: jitter, grayscale, blur and flip with per-sample parameters.

The crop and the drawn record come from the loader worker (semcl.data.views.colour_draw); this runs on the
training device over the whole batch and gives, on the CPU, the very pixels torchvision's per-image
transform gives (tests/data/test_colour_finish.py compares every pixel). How each op stays exact:

* Each op runs on the sub-batch of samples that take it at that point, in each sample's own jitter order;
  which samples those are is read off the record on the CPU, so the device is never synchronised.
* torchvision blends as `x.mul(f).add_(other, alpha=1 - f)`, one fused multiply-add per pixel, with the
  alpha rounded from double. The same value is formed in float64 here: the product of two float32 numbers
  is exact in float64 and, for pixels and grey levels, so is the sum, so one rounding to float32 gives
  the fused result on any device (a plain float32 `x*f + other*alpha` differs by up to 2 levels).
  The grey level (`r*0.2989 + g*0.587 + b*0.114`, two fused adds) is formed the same way.
* The contrast mean sums integer grey levels, exact in any order; it is then divided as torch.mean's
  float32 sum is (exact while H*W*255 < 2**24, views up to 256 x 256).
* The blur is torchvision's: 2-D kernels from the float32 softmax, made on the CPU, and one grouped
  conv2d over reflect padding. On CUDA the convolution sums in cuDNN's order, which may round a pixel
  that lies on a half level the other way (not measured: no GPU was at hand).
* Hue is torchvision's RGB -> HSV -> RGB, elementwise, with the per-sample shift as a float32 tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from semcl.data.views.colour_draw import BLUR, BLUR_STEP, FACTORS, FLIP, FLIP_STEP, GRAY, GREY, JITTER, ORDER, SIGMA


def _fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """float32 round(a + b*c), the fused result, via float64 (exact for the operands used here)."""
    return a.double().add_(b.double() * c.double()).float()


def _grey(x: torch.Tensor) -> torch.Tensor:
    """float32 [n, 1, H, W] grey level of uint8 [n, 3, H, W], torchvision's `_rgb_to_grayscale_image`."""
    r, g, b = x.unbind(1)
    w = torch.tensor([0.2989, 0.587, 0.114], dtype=torch.float32, device=x.device)
    out = _fma(r.mul(w[0]), g, w[1])
    return _fma(out, b, w[2]).unsqueeze(1)


def _blend(x: torch.Tensor, other: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """torchvision's `_blend` on uint8 x with per-sample ratios f (float64 [n] on the CPU)."""
    f32 = f.float().to(x.device).view(-1, 1, 1, 1)
    alpha = (1.0 - f).float().to(x.device).view(-1, 1, 1, 1)  # 1 - f in double, then float32: as add_'s alpha
    return _fma(x.mul(f32), other, alpha).clamp_(0, 255).to(torch.uint8)


def brightness(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return x.mul(f.float().to(x.device).view(-1, 1, 1, 1)).clamp_(0, 255).to(torch.uint8)


def contrast(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    g = _grey(x).floor_() if x.shape[1] == 3 else x.float()
    total = g.sum(dim=(1, 2, 3), keepdim=True, dtype=torch.float64).float()
    count = torch.tensor(float(g[0].numel()), dtype=torch.float32, device=x.device)
    return _blend(x, total.div(count), f)  # tensor / tensor: a true division on CUDA as well


def saturation(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return x.clone() if x.shape[1] == 1 else _blend(x, _grey(x).floor_(), f)


def hue(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """torchvision's adjust_hue_image (uint8, 3 channels) with a per-sample shift."""
    if x.shape[1] == 1:
        return x.clone()
    image = x.float().mul_(1.0 / 255)
    r, g, _ = image.unbind(1)
    minc, maxc = torch.aminmax(image, dim=1)
    eqc = maxc == minc
    ones = torch.ones_like(maxc)
    s = (maxc - minc) / torch.where(eqc, ones, maxc)
    divisor = torch.where(eqc, ones, maxc - minc).unsqueeze_(1)
    rc, gc, bc = ((maxc.unsqueeze(1) - image) / divisor).unbind(1)
    neq_r, eq_g = maxc != r, maxc == g
    hg = rc.add(2.0).sub_(bc).mul_(eq_g & neq_r)
    hr = bc.sub_(gc).mul_(~neq_r)
    hb = gc.add_(4.0).sub_(rc).mul_(neq_r.logical_and_(eq_g.logical_not_()))
    h = hr.add_(hg).add_(hb).mul_(1.0 / 6.0).add_(1.0).fmod_(1.0)
    h = h.add_(f.float().to(x.device).view(-1, 1, 1)).remainder_(1.0)
    # HSV -> RGB, torchvision's _hsv_to_rgb
    h6 = h.mul(6)
    i = torch.floor(h6)
    frac = h6.sub_(i)
    i = i.to(dtype=torch.int32).remainder_(6)
    sxf = s * frac
    one_minus_s = 1.0 - s
    q = (1.0 - sxf).mul_(maxc).clamp_(0.0, 1.0)
    t = sxf.add_(one_minus_s).mul_(maxc).clamp_(0.0, 1.0)
    p = one_minus_s.mul_(maxc).clamp_(0.0, 1.0)
    vpqt = torch.stack((maxc, p, q, t), dim=1)
    select = torch.tensor([[0, 2, 1, 1, 3, 0], [3, 0, 0, 2, 1, 1], [1, 1, 3, 0, 0, 2]], device=x.device)
    rgb = vpqt.gather(1, select[:, i].moveaxis(0, 1))
    return rgb.mul(255 + 1.0 - 1e-3).to(torch.uint8)


JITTER_OPS = (brightness, contrast, saturation, hue)  # ColorJitter's numbering


def gaussian_kernels(sigma: torch.Tensor, size: int) -> torch.Tensor:
    """float32 [n, size, size], torchvision's `_get_gaussian_kernel2d` for each sigma (CPU)."""
    lim = (size - 1) / (2.0 * 2.0 ** 0.5)
    xs = torch.linspace(-lim, lim, steps=size, dtype=torch.float32)
    k1 = torch.softmax(xs.view(1, -1).div(sigma.float().view(-1, 1)).pow(2).neg(), dim=1)
    return k1.unsqueeze(-1) * k1.unsqueeze(1)


def blur(x: torch.Tensor, sigma: torch.Tensor, size: int) -> torch.Tensor:
    n, c, h, w = x.shape
    kernels = gaussian_kernels(sigma, size).to(x.device).repeat_interleave(c, 0).view(n * c, 1, size, size)
    pad = size // 2
    padded = F.pad(x.float().view(1, n * c, h, w), [pad, pad, pad, pad], mode="reflect")
    return F.conv2d(padded, kernels, groups=n * c).view(n, c, h, w).round_().to(torch.uint8)


def _where(mask: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(mask).flatten()


def _apply(x: torch.Tensor, idx: torch.Tensor, op, *args) -> None:
    """x[idx] = op(x[idx], *args), in place; idx on the CPU."""
    if idx.numel() == len(x):
        x.copy_(op(x, *args))
    elif idx.numel():
        at = idx.to(x.device)
        x.index_copy_(0, at, op(x.index_select(0, at), *args))


def finish(crops: torch.Tensor, records: torch.Tensor, program: Sequence[str], kernel: int) -> torch.Tensor:
    """uint8 [B, C, S, S] crops (any device) and their float64 [B, RECORD] records (CPU) -> the finished
    uint8 views, the steps of `program` in order."""
    if crops.dtype != torch.uint8 or crops.dim() != 4 or crops.shape[1] not in (1, 3):
        raise ValueError(f"colour finish: expected uint8 [B, 1 or 3, S, S] crops, got {crops.dtype} {tuple(crops.shape)}")
    records = records.cpu()
    x = crops.clone()
    for step in program:
        if step == JITTER:
            order, factors = records[:, ORDER], records[:, FACTORS]
            for slot in range(4):
                for op, fn in enumerate(JITTER_OPS):
                    idx = _where(order[:, slot] == op)
                    _apply(x, idx, fn, factors[idx, op])
        elif step == GREY:
            if x.shape[1] == 3:
                _apply(x, _where(records[:, GRAY] > 0), lambda v: _grey(v).to(torch.uint8).expand(-1, 3, -1, -1))
        elif step == BLUR_STEP:
            idx = _where(records[:, BLUR] > 0)
            _apply(x, idx, blur, records[idx, SIGMA], kernel)
        elif step == FLIP_STEP:
            _apply(x, _where(records[:, FLIP] > 0), lambda v: v.flip(-1))
        else:
            raise ValueError(f"colour finish: unknown step {step!r}")
    return x
