"""MAE ViT fine-tuning (`mae_finetune`), GPaCo's multi-task baseline (`multitask_vit`) and GPaCo
(`gpaco_vit`) on timm ViTs (docs/papers/paco.md §c.6, §d.2; official GPaCo/MAE-ViTs code, MAE main_finetune).

Shared recipe: the ViT (MAE global pool + fc_norm) starts from an MAE checkpoint; a linear head
(trunc-normal std 2e-5, as MAE) on the pooled feature is the classifier (GPaCo: the class centres);
AdamW with layer-wise lr decay: parameter of layer l gets lr * decay^(depth + 1 - l) (embeddings
l = 0, block i l = i + 1, fc_norm / head / projector l = depth + 1), no weight decay on biases,
norms, pos_embed, cls_token. The schedule (optim.shape "mae"), gradient accumulation
(optim.accum_steps) and autocast (optim.amp) are the engine's.

* mae_finetune: one view, timm Mixup (mixup 0.8 / cutmix 1.0, switch 0.5, label smoothing 0.1)
  and soft-target CE  L = -sum_c t_c log softmax(z)_c.
* GPaCo / multi-task: both views through the one ViT, each called on its own (the official forward
  calls forward_features per view); MLP projector D -> D (GELU) -> D (GELU) -> 128; a queue of 8192
  normalised view-2 projections with labels, initialised with random labels over the classes as the
  official model (docs/papers/paco.md §c.6). GPaCo: the PaCo loss (semcl.losses.paco_loss) with both views as
  anchors, centres = head logits (no tau, no prior), centre target smoothed by 0.1; multi-task:
  label-smoothed CE on both views' logits + weight * SupCon (tau 0.2).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from semcl.config import OptimConfig
from semcl.errors import ConfigError
from semcl.losses import paco_loss, supcon_loss
from semcl.methods.base import Batch, DataInfo, Method, TrainContext
from semcl.methods.paco.method import init_queue
from semcl.methods.vit.mixup import SeededMixup, soft_target_cross_entropy
from semcl.models import MomentumQueue
from semcl.models.vit import build_vit, layer_decay_groups, load_mae_checkpoint
from semcl.runtime.checkpoint import save_atomic, scratch_writes


def vit_projector(dim: int, out_dim: int = 128) -> nn.Module:
    """GPaCo's ViT projector (models_vit_paco.py): Linear-GELU-Linear-GELU-Linear."""
    return nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, out_dim))


class _ViTMethod(Method):
    """The ViT, its classifier head, MAE's optimiser and the checkpoint loading."""

    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        size = cfg.data.image_size or 224
        self.backbone = build_vit(m.arch, image_size=size, in_channels=info.in_channels, drop_path=m.drop_path)
        self.head = nn.Linear(self.backbone.out_dim, info.num_classes)
        nn.init.trunc_normal_(self.head.weight, std=m.head_init_std)
        nn.init.zeros_(self.head.bias)
        # True once the MAE weights are in: a resumed run (state loaded before on_train_start) keeps its own
        self.register_buffer("pretrained_loaded", torch.zeros((), dtype=torch.bool))

    def on_train_start(self, ctx: TrainContext) -> None:
        path = self.cfg.method.checkpoint
        if path is None or bool(self.pretrained_loaded):
            return
        p = Path(path)
        if not p.is_absolute():
            if ctx.data_root is None:
                raise ConfigError(f"key 'method.checkpoint' = {path!r} is relative but the run has no data root")
            p = Path(ctx.data_root) / p
        if not p.is_file():
            raise ConfigError(f"{p}: MAE checkpoint named by 'method.checkpoint' not found")
        load_mae_checkpoint(self.backbone, p)
        self.pretrained_loaded.fill_(True)

    def param_groups(self) -> list[dict]:
        prefix = "backbone."
        named = [(n, p, n[len(prefix):] if n.startswith(prefix) else None) for n, p in self.named_parameters()]
        return layer_decay_groups(named, self.backbone.depth, self.cfg.optim.weight_decay, self.cfg.method.layer_decay)

    def configure_optimizer(self, optim: OptimConfig) -> torch.optim.Optimizer:
        """AdamW over the layer-decay groups (each carries its weight decay; lr x lr_scale in the engine)."""
        m = self.cfg.method
        # fused: one kernel per step over all 86-300 M parameters (about 2x the per-tensor loop on a CPU,
        # bench/bench_vit.py); the same update rule
        return torch.optim.AdamW(self.param_groups(), lr=optim.lr, betas=(m.beta1, m.beta2),
                                 weight_decay=optim.weight_decay, fused=True)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class MaeFinetune(_ViTMethod):
    """MAE fine-tuning baseline (`mae_finetune`)."""

    num_views = 1

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.mixup = SeededMixup(mixup=m.mixup, cutmix=m.cutmix, prob=m.mixup_prob, switch_prob=m.mixup_switch_prob,
                                 smoothing=m.label_smoothing, num_classes=info.num_classes)

    def prepare(self, batch: Batch) -> tuple[Batch, int | None]:
        """The step's mixup / cutmix seed, drawn per rank (MAE)."""
        return batch, self.mixup.draw(batch.labels.shape[0], batch.mixing_generator)

    def loss(self, inputs: tuple[Batch, int | None]) -> dict[str, torch.Tensor]:
        batch, seed = inputs
        x, target = self.mixup.apply(batch.views[0], batch.labels, seed)
        logits = self.head(self.backbone(x)).float()
        return {"loss": soft_target_cross_entropy(logits, target)}


class _TwoViewViT(_ViTMethod):
    """Both views through the ViT, projector, queue of view-2 projections (GPaCo's ViT model)."""

    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.projector = vit_projector(self.backbone.out_dim)
        self.keys = MomentumQueue(None)
        self.bank = self.keys.bank(m.queue_size, 128)
        init_queue(self.bank, m.queue_init, info.num_classes)  # official: models_vit_paco.py's queue
        self.tau = m.tau

    def _forward(self, batch: Batch):
        """(logits [2B, C], projections [2B, 128], labels [2B], contrast [2B + K], its labels)."""
        feats = [self.backbone(v) for v in batch.views[:2]]  # one call per view, as the official forward
        feats = torch.cat(feats)
        z = F.normalize(self.projector(feats).float(), dim=1)
        y = torch.cat([batch.labels, batch.labels])
        b = batch.labels.shape[0]
        queue, queue_labels = self.bank.features.clone(), self.bank.labels.clone()
        self.keys.stage(batch.labels, keys=z[b:])  # only view 2 is enqueued, after backward
        return self.head(feats).float(), z, y, torch.cat([z, queue]), torch.cat([y, queue_labels])

    def after_backward(self) -> None:
        self.keys.flush()


def _self_mask(n: int, m: int, device: torch.device) -> torch.Tensor:
    return torch.eye(n, m, dtype=torch.bool, device=device)


class GPaCoViT(_TwoViewViT):
    """GPaCo on a ViT (`gpaco_vit`)."""

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits, z, y, contrast, contrast_labels = self._forward(batch)
        m = self.cfg.method
        with torch.autocast(z.device.type, enabled=False):  # the loss in float32 under optim.amp
            loss = paco_loss(z, contrast, contrast_labels, y, logits, alpha=m.alpha, tau=self.tau,
                             self_mask=_self_mask(z.shape[0], contrast.shape[0], z.device),
                             smoothing=m.label_smoothing)
        return {"loss": loss}


class MultiTaskViT(_TwoViewViT):
    """Label-smoothed CE on both views + weight * SupCon (`multitask_vit`)."""

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits, z, y, contrast, contrast_labels = self._forward(batch)
        m = self.cfg.method
        with torch.autocast(z.device.type, enabled=False):
            ce = F.cross_entropy(logits, y, label_smoothing=m.label_smoothing)
            sup = supcon_loss(z, contrast, contrast_labels, y, tau=self.tau,
                              self_mask=_self_mask(z.shape[0], contrast.shape[0], z.device))
        return {"loss": ce + m.weight * sup}


def write_stand_in_checkpoint(method: _ViTMethod, data_root: Path) -> list[Path]:
    """A stand-in MAE checkpoint at `method.checkpoint` (relative to the root): MAE's {"model": state}
    layout with its pre-training `norm` in place of `fc_norm`, plus a decoder key and the mask token, which
    the fine-tuning load drops, so load_mae_checkpoint runs its whole path at the real ViT size."""
    path = method.cfg.method.checkpoint
    if path is None or Path(path).is_absolute() or (Path(data_root) / path).is_file():
        return []
    state = {k: v for k, v in method.backbone.state_dict().items() if not k.startswith("fc_norm.")}
    dim = method.backbone.out_dim
    state.update({"norm.weight": torch.ones(dim), "norm.bias": torch.zeros(dim),
                  "mask_token": torch.zeros(1, 1, dim), "decoder_embed.weight": torch.zeros(dim, dim)})
    out = Path(data_root) / path
    # temp file + rename: the preflight's workers share a stand-in root, and one that read the file while
    # another wrote it found a torn zip ("failed finding central directory")
    with scratch_writes():
        save_atomic({"model": state}, out)
    return [out]


__all__ = ["GPaCoViT", "MaeFinetune", "MultiTaskViT"]
