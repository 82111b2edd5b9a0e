"""Segmentation metrics: confusion matrix and mean IoU (MMSegmentation's definition).

conf[t, p] counts pixels of true class t predicted as p (pixels with t >= C are void, skipped).
IoU_c = conf[c, c] / (sum_p conf[c, p] + sum_t conf[t, c] - conf[c, c]); mIoU = mean of IoU_c over
the classes whose union is non-empty (mmseg's nanmean), in %.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def confusion(pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> torch.Tensor:
    """int64 [C, C] from predictions and targets of any equal shape."""
    t, p = target.reshape(-1).long(), pred.reshape(-1).long()
    keep = (t >= 0) & (t < num_classes)
    return torch.bincount(t[keep] * num_classes + p[keep], minlength=num_classes ** 2).reshape(num_classes, num_classes)


def mean_iou(conf: torch.Tensor) -> float:
    """mIoU (%) of a confusion matrix; classes absent from both prediction and truth are skipped."""
    conf = conf.double()
    inter = conf.diag()
    union = conf.sum(0) + conf.sum(1) - inter
    present = union > 0
    return 100.0 * float((inter[present] / union[present]).mean()) if bool(present.any()) else 0.0


def multi_scale_logits(segment, images: torch.Tensor, scales: list[float], flip: bool) -> torch.Tensor:
    """Mean softmax over scales (and horizontal flips) of segment(x) -> logits [B, C, h, w] at the
    input size, each resized back to images' size (mmseg aug-test averages the same way)."""
    h, w = images.shape[-2:]
    total = None
    for s in scales:
        x = images if s == 1.0 else F.interpolate(images, scale_factor=s, mode="bilinear", align_corners=False)
        for flipped in ((False, True) if flip else (False,)):
            xi = x.flip(-1) if flipped else x
            out = segment(xi)
            out = out.flip(-1) if flipped else out
            out = F.interpolate(out, size=(h, w), mode="bilinear", align_corners=False).softmax(1)
            total = out if total is None else total + out
    return total
