"""ViT fine-tuning (semcl.methods.vit, semcl.models.vit): layer-wise lr decay against a hand computation,
a GPaCo ViT step against a float64 brute force of the PaCo loss on the method's own modules, the MAE
checkpoint layout, the MAE schedule, mixup replay, and gradient accumulation against one big batch."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("timm")

from semcl.data import ImageSet  # noqa: E402
from semcl.engine.schedule import lr_at  # noqa: E402
from semcl.engine.train import train  # noqa: E402
from semcl.errors import ConfigError  # noqa: E402
from semcl.methods.base import Batch, DataInfo, Method, TrainContext, run_step  # noqa: E402
from semcl.methods.registry import method_class  # noqa: E402
from semcl.methods.vit.method import write_stand_in_checkpoint  # noqa: E402
from semcl.methods.vit.mixup import SeededMixup  # noqa: E402
from semcl.models.vit import build_vit  # noqa: E402
from semcl.run_config import build_config  # noqa: E402

C = 4


def _method(name: str, size: int = 16, **extra):
    cfg = build_config({"method": {"name": name, "arch": "vit_tiny_test", "checkpoint": None, "drop_path": 0.0,
                                   **extra},
                        "data": {"name": "imagenet", "image_size": size},
                        "optim": {"weight_decay": 0.05}}, where="test")
    torch.manual_seed(0)
    return method_class(name)(cfg, DataInfo(C, 3, None, torch.ones(C, dtype=torch.long)))


def _ctx(root=None) -> TrainContext:
    return TrainContext(None, [], torch.device("cpu"), None, 0, root)


def test_layer_decay_groups_match_hand_computation():
    # 2 blocks, decay 0.5: top layer = depth + 1 = 3; scale of layer l = 0.5 ** (3 - l)
    m = _method("mae_finetune", layer_decay=0.5)
    where = {id(p): g for g in m.param_groups() for p in g["params"]}
    expected_scale = {"backbone.cls_token": 0.125, "backbone.pos_embed": 0.125,
                      "backbone.patch_embed.proj.weight": 0.125, "backbone.patch_embed.proj.bias": 0.125,
                      "backbone.blocks.0.attn.qkv.weight": 0.25, "backbone.blocks.0.norm1.bias": 0.25,
                      "backbone.blocks.1.mlp.fc2.weight": 0.5, "backbone.fc_norm.weight": 1.0,
                      "head.weight": 1.0, "head.bias": 1.0}
    expected_wd = {"backbone.cls_token": 0.0, "backbone.pos_embed": 0.0, "backbone.patch_embed.proj.weight": 0.05,
                   "backbone.patch_embed.proj.bias": 0.0, "backbone.blocks.0.attn.qkv.weight": 0.05,
                   "backbone.blocks.0.norm1.bias": 0.0, "backbone.blocks.1.mlp.fc2.weight": 0.05,
                   "backbone.fc_norm.weight": 0.0, "head.weight": 0.05, "head.bias": 0.0}
    params = dict(m.named_parameters())
    for name, scale in expected_scale.items():
        assert where[id(params[name])]["lr_scale"] == scale, name
        assert where[id(params[name])]["weight_decay"] == expected_wd[name], name
    assert sum(len(g["params"]) for g in m.param_groups()) == len(params)  # every parameter once
    opt = m.configure_optimizer(m.cfg.optim)
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["betas"] == (0.9, 0.999)


def _paco_brute_force(z, y, queue, queue_labels, centers, alpha, tau, eps):
    """Per anchor i (both views are anchors), float64 loops: candidates = all other rows of [z, queue]
    plus the C centres; weights alpha on same-label samples, smoothed one-hot on centres."""
    contrast, cl = torch.cat([z, queue]), torch.cat([y, queue_labels])
    total = 0.0
    for i in range(z.shape[0]):
        logits = [float(centers[i, c]) for c in range(C)]
        weights = [(1 - eps) if c == y[i] else eps / (C - 1) for c in range(C)]
        for j in range(contrast.shape[0]):
            if j == i:
                continue
            logits.append(float(contrast[j] @ z[i]) / tau)
            weights.append(alpha if cl[j] == y[i] else 0.0)
        lse = math.log(sum(math.exp(v) for v in logits))
        total += -sum(w * (v - lse) for w, v in zip(weights, logits, strict=True)) / sum(weights)
    return total / z.shape[0]


def test_gpaco_vit_step_matches_paco_brute_force_and_enqueues_view_two():
    m = _method("gpaco_vit", queue_size=8, alpha=0.2, tau=0.2, label_smoothing=0.1)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        m.bank.features.copy_(F.normalize(torch.randn(8, 128, generator=g), dim=1))
        m.bank.labels.copy_(torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]))
    views = [torch.randn(3, 3, 16, 16, generator=g) for _ in range(2)]
    labels = torch.tensor([0, 2, 2])
    ref = copy.deepcopy(m).double()
    queue, queue_labels = ref.bank.features.clone(), ref.bank.labels.clone()
    loss = run_step(m, Batch.of(views, labels))["loss"]
    with torch.no_grad():
        feats = torch.cat([ref.backbone(v.double()) for v in views])
        z = F.normalize(ref.projector(feats), dim=1)
        expected = _paco_brute_force(z, torch.cat([labels, labels]), queue, queue_labels, ref.head(feats),
                                     0.2, 0.2, 0.1)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()
    m.after_backward()
    assert torch.allclose(m.bank.features[:3], z[3:].float(), atol=1e-5)  # view 2's projections
    assert m.bank.labels[:3].tolist() == labels.tolist() and int(m.bank.ptr) == 3


def test_queue_labels_start_random_over_the_classes():
    m = _method("multitask_vit", queue_size=64)
    assert int(m.bank.labels.min()) >= 0 and int(m.bank.labels.max()) < C


def test_multitask_vit_is_label_smoothed_ce_plus_weighted_supcon():
    m = _method("multitask_vit", queue_size=8, weight=0.5, tau=0.2)
    views = [torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    labels = torch.tensor([1, 3])
    ref = copy.deepcopy(m)
    loss = float(run_step(m, Batch.of(views, labels))["loss"].detach())
    with torch.no_grad():
        feats = torch.cat([ref.backbone(v) for v in views])
        y = torch.cat([labels, labels])
        logits = ref.head(feats).double()
        smooth = torch.full((4, C), 0.1 / C, dtype=torch.float64).scatter_(1, y[:, None], 0.9 + 0.1 / C)
        ce = float((-smooth * logits.log_softmax(1)).sum(1).mean())
        z = F.normalize(ref.projector(feats), dim=1).double()
        contrast = torch.cat([z, ref.bank.features.double()])
        cl = torch.cat([y, ref.bank.labels])
        sup = 0.0
        for i in range(4):  # SupCon: mean over positives of -log softmax over all other candidates
            s = contrast @ z[i] / 0.2
            keep = torch.arange(len(cl)) != i
            lse = torch.logsumexp(s[keep], 0)
            pos = keep & (cl == y[i])
            sup += float(-(s[pos] - lse).mean())
    assert loss == pytest.approx(ce + 0.5 * sup / 4, rel=1e-5)


def _write_mae_checkpoint(path, image_size: int):
    torch.manual_seed(7)
    vit = build_vit("vit_tiny_test", image_size=image_size)
    state = {k: v.clone() for k, v in vit.state_dict().items() if not k.startswith("fc_norm")}
    # what an MAE pre-training checkpoint also holds: the final norm, the mask token, decoder keys
    state.update({"norm.weight": torch.ones(32), "norm.bias": torch.zeros(32), "mask_token": torch.zeros(1, 1, 32),
                  "decoder_embed.weight": torch.zeros(16, 32)})
    torch.save({"model": state}, path)
    return state


def test_mae_checkpoint_loads_by_name_from_the_data_root(tmp_path):
    state = _write_mae_checkpoint(tmp_path / "mae_pretrain_vit_base.pth", image_size=16)
    m = _method("gpaco_vit", size=16, checkpoint="mae_pretrain_vit_base.pth", queue_size=8)
    head = m.head.weight.clone()
    m.on_train_start(_ctx(tmp_path))
    loaded = m.backbone.state_dict()
    for key in ("cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.1.attn.qkv.weight"):
        assert torch.equal(loaded[key], state[key]), key
    assert torch.equal(m.head.weight, head) and bool(m.pretrained_loaded)
    with torch.no_grad():  # a resumed run (flag restored from its checkpoint) keeps its own weights
        m.backbone.cls_token.zero_()
    m.on_train_start(_ctx(tmp_path))
    assert not m.backbone.cls_token.any()


def test_pos_embed_is_interpolated_when_the_grid_differs(tmp_path):
    state = _write_mae_checkpoint(tmp_path / "ck.pth", image_size=16)  # 2 x 2 patches
    m = _method("mae_finetune", size=32, checkpoint=str(tmp_path / "ck.pth"))  # 4 x 4 patches
    m.on_train_start(_ctx())
    pos = m.backbone.pos_embed
    assert pos.shape == (1, 17, 32)
    assert torch.equal(pos[:, 0], state["pos_embed"][:, 0])  # the class token's row is kept
    grid = state["pos_embed"][:, 1:].reshape(1, 2, 2, 32).permute(0, 3, 1, 2)
    want = F.interpolate(grid, size=(4, 4), mode="bicubic", align_corners=False).permute(0, 2, 3, 1).reshape(1, 16, 32)
    assert torch.allclose(pos[:, 1:], want)


def test_bad_checkpoints_name_the_file(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "wrong.pth")
    m = _method("mae_finetune", checkpoint=str(tmp_path / "wrong.pth"))
    with pytest.raises(ConfigError, match="wrong.pth: key 'model' missing"):
        m.on_train_start(_ctx())
    m = _method("mae_finetune", checkpoint="absent.pth")
    with pytest.raises(ConfigError, match="absent.pth"):
        m.on_train_start(_ctx(tmp_path))


def test_mae_schedule_warm_up_then_half_cycle_cosine():
    opt = build_config({"optim": {"shape": "mae", "lr": 1.0, "warmup_epochs": 2, "min_lr": 0.1}}, where="t").optim
    assert lr_at(opt, 10, 0, 5, 10) == pytest.approx(0.25)  # t = 0.5: 1 * 0.5 / 2
    assert lr_at(opt, 10, 2, 0, 10) == pytest.approx(1.0)
    assert lr_at(opt, 10, 6, 0, 10) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 4 / 8)))
    assert lr_at(opt, 10, 9, 5, 10) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 7.5 / 8)))


def test_mixup_replays_from_the_generator_and_leaves_numpy_alone():
    mix = SeededMixup(mixup=0.8, cutmix=1.0, prob=1.0, switch_prob=0.5, smoothing=0.1, num_classes=C)
    x, y = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
    np.random.seed(5)
    before = np.random.get_state()[1].copy()
    a = mix(x, y, torch.Generator().manual_seed(9))
    b = mix(x, y, torch.Generator().manual_seed(9))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert np.array_equal(np.random.get_state()[1], before)
    assert torch.allclose(a[1].sum(1), torch.ones(4))
    # row i mixes y_i and y_{B-1-i}: its target sits on those two classes beyond the smoothing floor
    floor = 0.1 / C
    assert torch.allclose(a[1][0, [1, 2]], torch.full((2,), floor))
    plain = SeededMixup(mixup=0, cutmix=0, prob=1.0, switch_prob=0.5, smoothing=0.1, num_classes=C)
    assert torch.allclose(plain(x, y, torch.Generator())[1][1], torch.tensor([floor, 0.9 + floor, floor, floor]))


def test_mae_finetune_mixes_from_the_rank_generator():
    """Several ranks: the step's mixup draw comes from the rank's own generator (MAE's per-process draws);
    one process: from the epoch's generator."""
    m = _method("mae_finetune")
    seen = []
    real = m.mixup.draw
    m.mixup.draw = lambda n, g: (seen.append(g), real(n, g))[1]
    x, y = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(0)), torch.tensor([0, 1, 2, 3])
    epoch_g, own = torch.Generator().manual_seed(2), torch.Generator().manual_seed(3)
    run_step(m, Batch.of([x], y, generator=epoch_g))
    run_step(m, Batch.of([x], y, generator=epoch_g, rank_generator=own))
    assert seen[0] is epoch_g and seen[1] is own


class _Linear(Method):
    """y = w . flatten(x) with a squared loss, in float64, on the raw images (no augmentation draws,
    whose stream would depend on the batch size)."""

    def __init__(self, cfg, info):
        super().__init__(cfg, info)
        torch.manual_seed(0)
        self.backbone = torch.nn.Linear(3 * 4 * 4, 1).double()

    def on_train_start(self, ctx: TrainContext) -> None:
        self.images = ctx.train_set.images.double().flatten(1) / 255

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        out = self.backbone(self.images[batch.indices]).squeeze(1)
        return {"loss": ((out - batch.labels.double()) ** 2).mean()}


def _train_linear(tmp_path, name: str, batch_size: int, accum: int | None) -> torch.Tensor:
    optim = {"lr": 0.05, "momentum": 0.0, "weight_decay": 0.0, "batch_size": batch_size, "cosine": False,
             "warmup_epochs": 0, **({"accum_steps": accum} if accum else {})}
    cfg = build_config({"optim": optim, "schedule": {"epochs": 2}, "data": {"augment": "crop_flip"}}, where="t")
    g = torch.Generator().manual_seed(0)
    data = ImageSet("cifar100", torch.randint(0, 256, (16, 3, 4, 4), generator=g, dtype=torch.uint8),
                    torch.randint(0, 3, (16,), generator=g), ["a", "b", "c"])
    m = _Linear(cfg, DataInfo(3, 3, None))
    train(m, data, cfg, seed=1, ckpt=tmp_path / name / "checkpoints" / "last.pt")
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def test_accumulation_equals_one_big_batch(tmp_path):
    accumulated = _train_linear(tmp_path, "a", batch_size=4, accum=2)
    big = _train_linear(tmp_path, "b", batch_size=8, accum=None)
    one = _train_linear(tmp_path, "c", batch_size=8, accum=1)
    assert torch.allclose(accumulated, big, rtol=0, atol=1e-12)
    assert torch.equal(big, one)  # accum_steps 1 is the plain loop, bit for bit


def test_preflight_stand_in_mae_checkpoint_loads_through_the_real_path(tmp_path):
    """The preflight's stand-in (the spec's StandIn.files: write_stand_in_checkpoint) is MAE's layout: another model
    loads it by name (every backbone key but fc_norm equals the writer's), the extra keys are dropped, an existing file is kept."""
    writer = _method("gpaco_vit", size=16, checkpoint="mae_pretrain_vit_base.pth", queue_size=8)
    written = write_stand_in_checkpoint(writer, tmp_path)
    assert written == [tmp_path / "mae_pretrain_vit_base.pth"]
    blob = torch.load(written[0], weights_only=True)
    assert {"norm.weight", "mask_token", "decoder_embed.weight"} <= set(blob["model"])
    assert not any(k.startswith("fc_norm.") for k in blob["model"])
    torch.manual_seed(123)
    reader = _method("mae_finetune", size=16, checkpoint="mae_pretrain_vit_base.pth")
    reader.on_train_start(_ctx(tmp_path))
    mine, theirs = reader.backbone.state_dict(), writer.backbone.state_dict()
    for key in mine:
        if not key.startswith("fc_norm."):
            assert torch.equal(mine[key], theirs[key]), key
    assert write_stand_in_checkpoint(writer, tmp_path) == []  # present: never overwritten
    assert write_stand_in_checkpoint(_method("mae_finetune", checkpoint=None), tmp_path / "x") == []


def test_the_stand_in_mae_checkpoint_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """Preflight workers share a stand-in root: one may load the file while another writes it. The writer fills
    a temp file of its own and renames it, so the final path never holds a partial zip."""
    import semcl.runtime.checkpoint as checkpoint

    final, seen = tmp_path / "mae_pretrain_vit_base.pth", []
    real_save = torch.save

    def watching_save(obj, f, *a, **k):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))  # the folder while the bytes go out
        return real_save(obj, f, *a, **k)

    monkeypatch.setattr(checkpoint.torch, "save", watching_save)
    writer = _method("gpaco_vit", size=16, checkpoint="mae_pretrain_vit_base.pth", queue_size=8)
    assert write_stand_in_checkpoint(writer, tmp_path) == [final]
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] != final.name  # only the writer's temp file
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]  # no temp file left behind
    assert "model" in torch.load(final, weights_only=True)
