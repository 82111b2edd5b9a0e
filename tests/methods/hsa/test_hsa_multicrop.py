"""HSA multi-crop: the small-crop twin of a view recipe, the extra views, and the loss with small-crop queries."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from semcl.data import stats
from semcl.data.views.augment import RECIPES, Augment
from semcl.data.views.build import build_augment
from semcl.data.views.multicrop import small_crop_view
from semcl.losses.hsa import two_positive_loss
from semcl.methods.base import Batch, DataInfo, TrainContext, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

SIZE, N, B, TAU = 16, 24, 6, 0.2
MEAN, STD = stats("fashion_mnist")


def test_small_crop_twin_of_a_batched_and_a_per_image_recipe():
    from torchvision.transforms import v2

    aug = build_augment("supcon", size=32, mean=(0.5,) * 3, std=(0.25,) * 3)
    small = small_crop_view(aug, 12, (0.05, 0.14))
    assert small.recipe.crop_scale == (0.05, 0.14) and small.size == 12 and small.recipe.jitter_p == aug.recipe.jitter_p
    x = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    assert small(x, torch.Generator().manual_seed(0)).shape == (3, 3, 12, 12)
    per_image = build_augment("sim_cifar", size=32, mean=(0.5,) * 3, std=(0.25,) * 3)
    twin = small_crop_view(per_image, 12, (0.05, 0.14))
    crops = [t for t in twin.transform.transforms if isinstance(t, v2.RandomResizedCrop)]
    assert len(crops) == 1 and tuple(crops[0].size) == (12, 12) and tuple(crops[0].scale) == (0.05, 0.14)
    assert twin(x, torch.Generator().manual_seed(0)).shape == (3, 3, 12, 12)
    with pytest.raises(ValueError, match="random crop"):
        small_crop_view(build_augment("test", size=32, mean=(0.5,) * 3, std=(0.25,) * 3), 12)


class DoubleAugment(Augment):
    """The supcon recipe with float64 output (the method runs in float64 here)."""

    def __call__(self, images, generator):
        return super().__call__(images, generator).double()


def _method(**knobs):
    cfg = build_config({"method": {"name": "hsa", "queue_size": 16, **knobs},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4},
                        "data": {"name": "fashion_mnist"}}, where="test")
    torch.manual_seed(0)
    m = method_class("hsa")(cfg, DataInfo(3, 1, None)).double()
    images = torch.randint(0, 256, (N, 1, SIZE, SIZE), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    aug = DoubleAugment(RECIPES["supcon"], size=SIZE, mean=MEAN, std=STD)
    ctx = TrainContext(SimpleNamespace(images=images, labels=torch.zeros(N, dtype=torch.long)),
                       [aug], torch.device("cpu"), None, 0)
    m.on_train_start(ctx)
    return m, ctx


def _batch(m, ctx) -> Batch:
    g = torch.Generator().manual_seed(7)
    idx = torch.arange(2, 2 + B)
    views = [v.double() for v in m.make_views(ctx.train_set, idx, g, ctx.augment)]
    return Batch(views, torch.zeros(B, dtype=torch.long), idx, 0, 0, g)


def _q(m, x):
    return F.normalize(m.head.net(m.backbone(x)), dim=1)


def _k(m, x):
    return F.normalize(m.key_head.net(m.key_backbone(x)), dim=1)


def test_moco_with_small_crops_adds_one_infonce_per_crop():
    from semcl.losses.hsa import info_nce

    m, ctx = _method(neighbours=False, cutmix=False, companions=False, multicrop=2, multicrop_size=0.5)
    batch = _batch(m, ctx)
    assert [tuple(v.shape[-2:]) for v in batch.views] == [(SIZE, SIZE)] * 2 + [(SIZE // 2, SIZE // 2)] * 2
    queue = m.bank.features.clone()
    loss = run_step(m, batch)["loss"]
    with torch.no_grad():
        k_a = _k(m, batch.views[1])
        want = sum(info_nce(_q(m, v), k_a, queue, TAU).mean() for v in (batch.views[0], *batch.views[2:]))
    torch.testing.assert_close(loss.detach(), want, rtol=1e-12, atol=1e-12)


def _csml_terms(m, ctx, **knobs):
    """The method's loss on one step and, recomputed in float64 from its modules, its global terms
    (L_qa, L_qp; no CutMix here) and its small-crop terms."""
    from semcl.data.semantics.neighbours import draw_neighbours

    m.on_epoch_start(0)
    batch = _batch(m, ctx)
    g = torch.Generator()
    g.set_state(batch.generator.get_state())  # replay the step's draws: the neighbours and their two views
    queue = m.bank.features.clone()
    out = run_step(m, batch)
    nb = ctx.train_set.images[draw_neighbours(m.neighbours.table, g, batch.indices)]
    view_q, view_k = ctx.augment[0](nb, g), ctx.augment[0](nb, g)
    with torch.no_grad():
        q_a, k_a, q_p, k_p = _q(m, batch.views[0]), _k(m, batch.views[1]), _q(m, view_q), _k(m, view_k)
        glob = [two_positive_loss(q_a, k_a, k_p, queue, TAU, 0.5, 0.5), two_positive_loss(q_p, k_p, k_a, queue, TAU, 0.5, 0.5)]
        crops = [two_positive_loss(_q(m, v), k_a, k_p, queue, TAU, 0.5, 0.5) for v in batch.views[2:]]
    return out["loss"].detach(), glob, crops


def test_csml_with_small_crops_keeps_the_codes_global_weighting():
    """Default (split): (L_qa + L_qp) / 2, as a single-crop row weighs them, plus the mean of the small-crop terms."""
    m, ctx = _method(k=3, cutmix=False, companions=False, multicrop=2, reduction="mean", warmup_epochs=0)
    assert m.knobs.multicrop_reduction == "split"
    loss, glob, crops = _csml_terms(m, ctx)
    torch.testing.assert_close(loss, sum(glob) / 2 + sum(crops) / 2, rtol=1e-12, atol=1e-12)


def test_csml_with_small_crops_divides_every_term_under_mean_all():
    """Variant (all): one mean over the 2 global and 2 small-crop terms."""
    m, ctx = _method(k=3, cutmix=False, companions=False, multicrop=2, reduction="mean", warmup_epochs=0,
                     multicrop_reduction="all")
    loss, glob, crops = _csml_terms(m, ctx)
    torch.testing.assert_close(loss, (sum(glob) + sum(crops)) / 4, rtol=1e-12, atol=1e-12)


def test_multicrop_reduction_only_with_csml_small_crops():
    from semcl.errors import ConfigError

    assert _method(k=3, companions=False)[0].knobs.multicrop_reduction is None  # single crop: not in the config
    with pytest.raises(ConfigError, match="multicrop_reduction"):
        _method(k=3, multicrop_reduction="all")
    with pytest.raises(ConfigError, match="multicrop_reduction"):
        _method(neighbours=False, cutmix=False, companions=False, multicrop=2, multicrop_reduction="split")


def test_multicrop_needs_one_positive_and_infonce():
    from semcl.errors import ConfigError

    with pytest.raises(ConfigError, match="multicrop"):
        _method(k=3, positives=2, multicrop=2)
