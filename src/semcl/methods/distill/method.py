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
import torch.nn.functional as F
from torch import nn

from semcl.losses.distill import (
    ConvRegressor,
    Embed,
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
    kd_loss,
    nst_loss,
    pkt_loss,
    rkd_loss,
    sp_loss,
)
from semcl.methods.base import Batch, DataInfo, Dependency, Method, TrainContext
from semcl.methods.distill.teacher import image_size, load_teacher, plain_transform, teacher_pass
from semcl.models.kd import build_kd_model, feature_shapes


class KDTeacher(Method):
    """Plain CE training of a KD-zoo network; `features` = its pooled penultimate vector."""

    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_kd_model(cfg.model.backbone, info.num_classes, info.in_channels)

    def training_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {"loss": F.cross_entropy(self.backbone(batch.views[0]), batch.labels)}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.forward_features(x)[0][-1]

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


def _zip_stages(g_s: list, g_t: list) -> tuple[list, list]:
    """The first min(len) entries of both lists (RepDistiller's zip over unequal stage lists)."""
    n = min(len(g_s), len(g_t))
    return list(g_s[:n]), list(g_t[:n])


class Distill(Method):
    """Student + frozen teacher. Subclasses set `teacher_feats` (the teacher entries the loss reads,
    what `cached` stores), build their modules in `build` and define `distill_loss` (and, two-stage
    ones, `init_loss` for epochs < init_epochs)."""

    has_classifier = True
    preact = False  # AB reads pre-ReLU stage maps
    teacher_feats: tuple[int, ...] = ()

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.backbone = build_kd_model(cfg.model.backbone, info.num_classes, info.in_channels)
        self.teacher = build_kd_model(m.teacher_arch, info.num_classes, info.in_channels)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.size = image_size(cfg)
        self.n_data = int(info.class_counts.sum()) if info.class_counts is not None else 0
        self.init_epochs = int(getattr(m, "init_epochs", 0))
        s_shapes = [(1, *s) for s in feature_shapes(self.backbone, self.size, info.in_channels)]
        t_shapes = [(1, *s) for s in feature_shapes(self.teacher, self.size, info.in_channels)]
        self.build(s_shapes, t_shapes)
        self.teacher_loaded = False
        self.cache: dict[str, torch.Tensor] = {}  # not state: recomputed by on_train_start (also on resume)

    def build(self, s_shapes: list[tuple[int, ...]], t_shapes: list[tuple[int, ...]]) -> None:
        """Create the trainable distillation modules (connectors, heads, embeddings)."""

    # ---- teacher ---------------------------------------------------------------------------
    def train(self, mode: bool = True):
        super().train(mode)
        self.teacher.eval()  # frozen: BN running statistics stay the teacher run's
        return self

    def load_dependencies(self, deps: list[Dependency]) -> None:
        """The teacher row's run (same seed): its final `net.*` weights, loaded bit-exactly."""
        if len(deps) != 1 or deps[0].kind != "teacher":
            raise ValueError(f"method {self.cfg.method.name!r} needs exactly one 'teacher' run, got "
                             f"{[d.kind for d in deps]}")
        load_teacher(self.teacher, deps[0], self.cfg.method.teacher_arch)
        self.teacher_loaded = True

    def on_train_start(self, ctx: TrainContext) -> None:
        if not self.teacher_loaded:
            raise ValueError(f"method {self.cfg.method.name!r}: no teacher loaded (the row needs 'teacher: <row>')")
        if self.cfg.method.teacher_outputs == "cached" or self.needs_teacher_pass():
            self.cache = teacher_pass(self.teacher, ctx.train_set.images, plain_transform(self.cfg, self.size),
                                      tuple(sorted(set(self.teacher_feats) | {-1})), ctx.device, self.preact)
        self.prepare(ctx)

    def needs_teacher_pass(self) -> bool:
        """Whether `prepare` reads the cache even in online mode (SCNS-instance's pools)."""
        return False

    def prepare(self, ctx: TrainContext) -> None:
        """Per-run set-up after the teacher pass (negative samplers)."""

    def teacher_targets(self, batch: Batch) -> tuple[list[torch.Tensor | None], torch.Tensor]:
        """(teacher feature list, teacher logits) for the batch, without gradient."""
        x = batch.views[0]
        if self.cfg.method.teacher_outputs == "online":
            with torch.no_grad():
                return self.teacher.forward_features(x, preact=self.preact)
        idx = batch.indices.cpu()
        feats: list[torch.Tensor | None] = [None] * len(self.teacher.feature_channels)
        for key, value in self.cache.items():
            if key.startswith("feat"):
                feats[int(key[4:])] = value[idx].to(x.device)
        return feats, self.cache["logits"][idx].to(x.device)

    # ---- training ----------------------------------------------------------------------------
    def training_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        if batch.epoch < self.init_epochs:
            loss = self.init_loss(batch)
            return {"loss": loss, "init": loss.detach()}
        m = self.cfg.method
        feats_s, logits_s = self.backbone.forward_features(batch.views[0], preact=self.preact)
        feats_t, logits_t = self.teacher_targets(batch)
        ce = F.cross_entropy(logits_s, batch.labels)
        zero = ce.new_zeros(())
        kd = kd_loss(logits_s, logits_t, m.kd_t) if m.alpha else zero
        distill = self.distill_loss(feats_s, feats_t, batch) if m.beta else zero
        loss = m.gamma * ce + m.alpha * kd + m.beta * distill
        return {"loss": loss, "ce": ce.detach(), "kd": kd.detach(), "distill": distill.detach()}

    def distill_loss(self, feats_s: list, feats_t: list, batch: Batch) -> torch.Tensor:
        return feats_s[-1].new_zeros(())

    def init_loss(self, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    # ---- evaluation --------------------------------------------------------------------------
    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.forward_features(x)[0][-1]

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


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
        return at_loss(*_zip_stages(feats_s[1:-1], feats_t[1:-1]))


class SP(Distill):
    teacher_feats = (-2,)

    def distill_loss(self, feats_s, feats_t, batch):
        return sp_loss(feats_s[-2], feats_t[-2])


class CC(Distill):
    teacher_feats = (-1,)

    def build(self, s_shapes, t_shapes):
        dim = self.cfg.method.feat_dim
        self.embed_s, self.embed_t = Embed(s_shapes[-1][1], dim), Embed(t_shapes[-1][1], dim)

    def distill_loss(self, feats_s, feats_t, batch):
        return cc_loss(self.embed_s(feats_s[-1]), self.embed_t(feats_t[-1]), variant=self.cfg.method.variant)


class VID(Distill):
    def build(self, s_shapes, t_shapes):
        g_s, g_t = _zip_stages(s_shapes[1:-1], t_shapes[1:-1])
        self.teacher_feats = tuple(range(1, 1 + len(g_t)))
        self.heads = nn.ModuleList(VIDHead(s[1], t[1]) for s, t in zip(g_s, g_t, strict=True))

    def distill_loss(self, feats_s, feats_t, batch):
        g_s, g_t = _zip_stages(feats_s[1:-1], feats_t[1:-1])
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
        return nst_loss(*_zip_stages(feats_s[1:-1], feats_t[1:-1]))


class AB(Distill):
    """Init stage: student feature layers + connectors on the AB loss of pre-ReLU maps feat[1:-1];
    main stage: gamma * CE + alpha * KD (RepDistiller adds no AB term after the initialisation)."""

    preact = True

    def build(self, s_shapes, t_shapes):
        g_s, g_t = _zip_stages(s_shapes[1:-1], t_shapes[1:-1])
        self.teacher_feats = tuple(range(1, 1 + len(g_t)))
        self.connectors = nn.ModuleList(ConvRegressor(s, t, use_relu=False) for s, t in zip(g_s, g_t, strict=True))

    def init_loss(self, batch):
        feats_s, _ = self.backbone.forward_features(batch.views[0], preact=True)
        feats_t, _ = self.teacher_targets(batch)
        g_s, g_t = _zip_stages(feats_s[1:-1], feats_t[1:-1])
        return ab_loss([c(s) for c, s in zip(self.connectors, g_s, strict=True)], g_t)


class FSP(Distill):
    """Init stage: student feature layers on the FSP loss of feat[:-1]; main stage: gamma * CE + alpha * KD.
    Needs equal channel counts per stage (RepDistiller: FSP is N/A for wrn-40-2 -> wrn-40-1)."""

    def build(self, s_shapes, t_shapes):
        g_s, g_t = _zip_stages(s_shapes[:-1], t_shapes[:-1])
        if [s[1] for s in g_s] != [t[1] for t in g_t]:
            raise ValueError(f"fsp: student {self.cfg.model.backbone} and teacher {self.cfg.method.teacher_arch} "
                             f"differ in stage channels ({[s[1] for s in g_s]} vs {[t[1] for t in g_t]})")
        self.teacher_feats = tuple(range(len(g_t)))

    def init_loss(self, batch):
        feats_s, _ = self.backbone.forward_features(batch.views[0])
        feats_t, _ = self.teacher_targets(batch)
        return fsp_loss(*_zip_stages(feats_s[:-1], feats_t[:-1]))


class FT(Distill):
    """Init stage: the paraphraser alone learns to reconstruct the teacher's feat[-2] (the student is
    not run); main stage: + beta * L_FT(translator(S), encoder(T)) with the paraphraser frozen."""

    teacher_feats = (-2,)

    def build(self, s_shapes, t_shapes):
        self.paraphraser = Paraphraser(t_shapes[-2][1])
        self.translator = Translator(s_shapes[-2][1], t_shapes[-2][1])

    def init_loss(self, batch):
        feats_t, _ = self.teacher_targets(batch)
        _, rec = self.paraphraser(feats_t[-2])
        return ft_reconstruction_loss(feats_t[-2], rec)

    def distill_loss(self, feats_s, feats_t, batch):
        with torch.no_grad():
            factor_t = self.paraphraser.encoder(feats_t[-2])
        return ft_loss(self.translator(feats_s[-2]), factor_t, variant=self.cfg.method.variant)


from semcl.methods.distill.contrast import CRD, SCNSClass, SCNSInstance  # noqa: E402  (they subclass Distill)

__all__ = ["AB", "AT", "CC", "CRD", "FSP", "FT", "KD", "NST", "PKT", "RKD", "SP", "VID", "Distill", "FitNet",
           "KDTeacher", "SCNSClass", "SCNSInstance"]
