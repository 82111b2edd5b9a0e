"""Teacher training and the distillation students (schemas, loss weights and the `cached` / `online`
teacher modes: semcl.methods.distill). One step of a student:

    feats_S, z_S = student(x)                  x: the augmented batch
    feats_T, z_T = teacher(x) (online) | cache[indices] (cached; un-augmented images)
    loss = gamma * CE(z_S, y) + alpha * KD(z_S, z_T; T) + beta * L_distill(feats_S, feats_T)

Feature lists follow KDNet.forward_features: [stem, stage 1..n, pooled]; RepDistiller's layer choices:
FitNet feat[hint_layer], AT / VID / NST / AB feat[1:-1], SP / FT feat[-2], FSP feat[:-1], CC / RKD /
PKT / CRD feat[-1]. Cross-family pairs with different stage counts pair the first stages (RepDistiller
zips the two lists). Semantics after RepDistiller (BSD 2-Clause, Copyright 2020 Yonglong Tian), our code.
"""

from __future__ import annotations

import torch
from torch import nn

from semcl.losses.distill import (
    ConvRegressor,
    Embed,
    LinearEmbed,
    Paraphraser,
    Translator,
    VIDHead,
    ab_loss,
    at_loss,
    cc_loss,
    fsp_loss,
    ft_loss,
    ft_reconstruction_loss,
    hint_loss,
    nst_loss,
    pkt_loss,
    rkd_loss,
    sp_loss,
)
from semcl.methods.distill.contrast import CRD, SCNSClass, SCNSInstance
from semcl.methods.distill.core import Distill, KDTeacher, zip_stages
from semcl.models.kd import KD_MODEL_ALIASES


class KD(Distill):
    """Hinton KD: the loss is gamma * CE + alpha * KD alone (beta 0)."""


class FitNet(Distill):
    def build(self, s_shapes, t_shapes):
        self.hint = self.cfg.method.hint_layer
        self.teacher_feats = (self.hint,)
        self.regressor = ConvRegressor(s_shapes[self.hint], t_shapes[self.hint])

    def distill_loss(self, feats_s, feats_t, batch):
        return hint_loss(self.regressor(feats_s[self.hint]), feats_t[self.hint])


class AT(Distill):
    def build(self, s_shapes, t_shapes):
        self.teacher_feats = tuple(range(1, len(t_shapes) - 1))

    def distill_loss(self, feats_s, feats_t, batch):
        return at_loss(*zip_stages(feats_s[1:-1], feats_t[1:-1]))


class SP(Distill):
    teacher_feats = (-2,)

    def distill_loss(self, feats_s, feats_t, batch):
        return sp_loss(feats_s[-2], feats_t[-2])


class CC(Distill):
    """variant repdistiller: RepDistiller's Correlation on `LinearEmbed` outputs (train_student.py: no L2
    normalisation); variant paper: the Gaussian-kernel congruence on normalised `Embed` outputs."""

    teacher_feats = (-1,)

    def build(self, s_shapes, t_shapes):
        dim = self.cfg.method.feat_dim
        embed = LinearEmbed if self.cfg.method.variant == "repdistiller" else Embed
        self.embed_s, self.embed_t = embed(s_shapes[-1][1], dim), embed(t_shapes[-1][1], dim)

    def distill_loss(self, feats_s, feats_t, batch):
        return cc_loss(self.embed_s(feats_s[-1]), self.embed_t(feats_t[-1]), variant=self.cfg.method.variant)


class VID(Distill):
    def build(self, s_shapes, t_shapes):
        g_s, g_t = zip_stages(s_shapes[1:-1], t_shapes[1:-1])
        self.teacher_feats = tuple(range(1, 1 + len(g_t)))
        self.heads = nn.ModuleList(VIDHead(s[1], t[1]) for s, t in zip(g_s, g_t, strict=True))

    def distill_loss(self, feats_s, feats_t, batch):
        g_s, g_t = zip_stages(feats_s[1:-1], feats_t[1:-1])
        return sum(head(s, t) for head, s, t in zip(self.heads, g_s, g_t, strict=True))


class RKD(Distill):
    teacher_feats = (-1,)

    def distill_loss(self, feats_s, feats_t, batch):
        return rkd_loss(feats_s[-1], feats_t[-1])


class PKT(Distill):
    teacher_feats = (-1,)

    def distill_loss(self, feats_s, feats_t, batch):
        return pkt_loss(feats_s[-1], feats_t[-1], variant=self.cfg.method.variant)


class NST(Distill):
    def build(self, s_shapes, t_shapes):
        self.teacher_feats = tuple(range(1, len(t_shapes) - 1))

    def distill_loss(self, feats_s, feats_t, batch):
        return nst_loss(*zip_stages(feats_s[1:-1], feats_t[1:-1]))


def ab_connector(s_shape: tuple[int, ...], t_shape: tuple[int, ...]) -> nn.Module:
    """RepDistiller's rule (models/util.py `Connector._make_conenctors`): the identity where the student
    and teacher stage maps agree in channels and height, else a 1x1-or-strided conv + BN (no ReLU)."""
    if s_shape[1] == t_shape[1] and s_shape[2] == t_shape[2]:
        return nn.Identity()
    return ConvRegressor(s_shape, t_shape, use_relu=False)


class AB(Distill):
    """Init stage: student feature layers + connectors on the AB loss of pre-ReLU maps feat[1:-1];
    main stage: gamma * CE + alpha * KD (RepDistiller adds no AB term after the initialisation)."""

    preact = True

    def build(self, s_shapes, t_shapes):
        g_s, g_t = zip_stages(s_shapes[1:-1], t_shapes[1:-1])
        self.teacher_feats = tuple(range(1, 1 + len(g_t)))
        if self.cfg.method.connector == "repdistiller":
            conns = [ab_connector(s, t) for s, t in zip(g_s, g_t, strict=True)]
        else:  # variant "conv": a trainable conv + BN on every stage, matching shapes too
            conns = [ConvRegressor(s, t, use_relu=False) for s, t in zip(g_s, g_t, strict=True)]
        self.connectors = nn.ModuleList(conns)

    def init_loss(self, batch):
        feats_s, _ = self.backbone.forward_features(batch.views[0], preact=True)
        feats_t, _ = self.teacher_targets(batch)
        g_s, g_t = zip_stages(feats_s[1:-1], feats_t[1:-1])
        return ab_loss([c(s) for c, s in zip(self.connectors, g_s, strict=True)], g_t)


class FSP(Distill):
    """Init stage: student feature layers on the FSP loss of feat[:-1]; main stage: gamma * CE + alpha * KD.
    Needs equal channel counts per stage (RepDistiller: FSP is N/A for wrn-40-2 -> wrn-40-1)."""

    def build(self, s_shapes, t_shapes):
        g_s, g_t = zip_stages(s_shapes[:-1], t_shapes[:-1])
        if [s[1] for s in g_s] != [t[1] for t in g_t]:
            raise ValueError(f"fsp: student {self.cfg.model.backbone} and teacher {self.cfg.method.teacher_arch} "
                             f"differ in stage channels ({[s[1] for s in g_s]} vs {[t[1] for t in g_t]})")
        self.teacher_feats = tuple(range(len(g_t)))

    def init_loss(self, batch):
        feats_s, _ = self.backbone.forward_features(batch.views[0])
        feats_t, _ = self.teacher_targets(batch)
        return fsp_loss(*zip_stages(feats_s[:-1], feats_t[:-1]))


FT_INIT_LR_SMALL = 0.01  # RepDistiller helper/pretrain.py: FT initialisation lr of these students
FT_SMALL_LR_STUDENTS = frozenset({"resnet8", "resnet14", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110",
                                  "resnet8x4", "resnet32x4", "wrn_16_1", "wrn_16_2", "wrn_40_1", "wrn_40_2"})


def ft_init_lr(cfg) -> float:
    """FT's initialisation lr: method.init_lr where set, else RepDistiller's rule (0.01 for resnet* and
    wrn_* students, the run's optim.lr for the others: MobileNetV2 / ShuffleV1 / ShuffleV2 / vgg*)."""
    if cfg.method.init_lr is not None:
        return float(cfg.method.init_lr)
    student = KD_MODEL_ALIASES.get(cfg.model.backbone, cfg.model.backbone)
    return FT_INIT_LR_SMALL if student in FT_SMALL_LR_STUDENTS else float(cfg.optim.lr)


class FT(Distill):
    """Init stage: the paraphraser alone learns to reconstruct the teacher's feat[-2] (the student is
    not run); main stage: + beta * L_FT(translator(S), encoder(T)) with the paraphraser frozen."""

    teacher_feats = (-2,)

    def build(self, s_shapes, t_shapes):
        self.paraphraser = Paraphraser(t_shapes[-2][1])
        self.translator = Translator(s_shapes[-2][1], t_shapes[-2][1])

    def param_groups(self):
        """The paraphraser trains only in the initialisation, at `init_lr` (RepDistiller helper/pretrain.py:
        0.01 for resnet*/wrn* students, else the run's lr); frozen afterwards, so the scale acts there alone."""
        lr = self.cfg.optim.lr
        para = list(self.paraphraser.parameters())
        rest = [p for n, p in self.named_parameters() if p.requires_grad and not n.startswith("paraphraser.")]
        return [{"params": rest}, {"params": para, "lr_scale": ft_init_lr(self.cfg) / lr}]

    def init_loss(self, batch):
        feats_t, _ = self.teacher_targets(batch)
        _, rec = self.paraphraser(feats_t[-2])
        return ft_reconstruction_loss(feats_t[-2], rec)

    def distill_loss(self, feats_s, feats_t, batch):
        with torch.no_grad():
            factor_t = self.paraphraser.encoder(feats_t[-2])
        return ft_loss(self.translator(feats_s[-2]), factor_t, variant=self.cfg.method.variant)


__all__ = ["AB", "AT", "CC", "CRD", "FSP", "FT", "KD", "NST", "PKT", "RKD", "SP", "VID", "Distill", "FitNet",
           "KDTeacher", "SCNSClass", "SCNSInstance"]
