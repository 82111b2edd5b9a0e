"""The teacher run and the student base class (see semcl.methods.distill.method for the loss)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from semcl.losses.distill import kd_loss
from semcl.methods.base import SHAPES_ONLY_IMAGES, Batch, DataInfo, Dependency, Method, TrainContext, repeat_rows
from semcl.methods.distill.teacher import image_size, load_teacher, plain_transform, teacher_pass
from semcl.models.kd import build_kd_model, feature_shapes


class KDTeacher(Method):
    """Plain CE training of a KD-zoo network (kd_teacher: method.teacher_arch, kd_student:
    model.backbone); `features` = its pooled penultimate vector."""

    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        arch = getattr(cfg.method, "teacher_arch", None) or cfg.model.backbone
        self.backbone = build_kd_model(arch, info.num_classes, info.in_channels)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {"loss": F.cross_entropy(self.backbone(batch.views[0]), batch.labels)}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.forward_features(x)[0][-1]

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


def zip_stages(g_s: list, g_t: list) -> tuple[list, list]:
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
            images = ctx.train_set.images
            if ctx.shapes_only:  # the preflight's memory check: two images' outputs, repeated to every image's row
                images = images[:SHAPES_ONLY_IMAGES]
            self.cache = teacher_pass(self.teacher, images, plain_transform(self.cfg, self.size),
                                      tuple(sorted(set(self.teacher_feats) | {-1})), ctx.device, self.preact)
            if ctx.shapes_only:
                n = ctx.train_set.images.shape[0]
                self.cache = {k: repeat_rows(v, n) for k, v in self.cache.items()}
        self.set_up(ctx)

    def needs_teacher_pass(self) -> bool:
        """Whether `set_up` reads the cache even in online mode (SCNS-instance's pools)."""
        return False

    def set_up(self, ctx: TrainContext) -> None:
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
    def configure_optimizer(self, optim):
        # kept so that the main stage of a two-stage method can start from a fresh optimiser state
        self._optimizer = super().configure_optimizer(optim)
        return self._optimizer

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        fresh = getattr(self.cfg.method, "main_stage_optimizer", "fresh") == "fresh"
        if fresh and self.init_epochs and batch.epoch == self.init_epochs and batch.step == 0:
            # RepDistiller builds a new SGD for the main stage (train_student.py after helper/pretrain.py
            # `init`): no momentum carried over. At step 0 only, so a resume inside this epoch keeps the
            # main stage's own momentum (restored from the checkpoint).
            opt = getattr(self, "_optimizer", None)
            if opt is not None:
                opt.state.clear()
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


