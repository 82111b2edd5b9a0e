"""The scns_supcon method: backbone + projection head, two views, bank negatives from a sampler."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from semcl.data.semantics.negatives import ClassConditionedNegatives, InstanceConditionedNegatives, UniformNegatives
from semcl.errors import ConfigError
from semcl.losses.latent_mixup import lm_distance_loss, mix_with_positive
from semcl.losses.scns_supcon import bank_supcon_loss
from semcl.methods.base import Batch, DataInfo, Dependency, Method, TrainContext
from semcl.models import ProjectionHead, build_backbone


class Drawn(NamedTuple):
    """A step's host draws: the batch, [B, K] bank negatives by training-set index, and the latent-mixup
    lambdas [B, n_mix] (None without latent mixup)."""

    batch: Batch
    negatives: torch.Tensor
    lam: torch.Tensor | None


class SCNSSupCon(Method):
    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim,
                                   num_layers=cfg.model.head_layers)
        n = int(info.class_counts.sum()) if info.class_counts is not None else 0
        if n < 2:
            raise ValueError("scns_supcon: the training-set size is unknown (DataInfo.class_counts)")
        # one unit-norm entry per training image, random until the image is first seen (CRD's bank)
        self.register_buffer("bank", F.normalize(torch.randn(n, cfg.model.head_dim), dim=1))
        self.sampler = None

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.head(self.backbone(x)).float(), dim=1)

    def on_train_start(self, ctx: TrainContext) -> None:
        m = self.cfg.method
        labels = ctx.train_set.labels.cpu()
        self.train_labels = labels
        if m.negatives == "uniform":
            self.sampler = UniformNegatives(labels, self.info.num_classes)
            return
        from semcl.data.semantics.word_vectors import class_word_vectors, content_sha256, cosine_similarity_matrix

        if m.vectors_path is not None and content_sha256(m.vectors_path) != m.vectors_sha256:
            raise ConfigError(f"{m.vectors_path}: content sha256 differs from 'method.vectors_sha256'")
        if not self.info.class_names:
            raise ValueError(f"{self.cfg.data.name}: SCNS-class needs class names")
        sim = cosine_similarity_matrix(class_word_vectors(list(self.info.class_names), m.vectors,
                                                          m.vectors_path).vectors)
        self.sampler = ClassConditionedNegatives(labels, sim, m.k, m.weighting, m.softmax_t)
        if ctx.run_dir is not None:
            ctx.run_dir.mkdir(parents=True, exist_ok=True)
            torch.save({"similarity": sim, "probs": self.sampler.probs}, ctx.run_dir / "scns_negatives.pt")

    def prepare(self, batch: Batch) -> Drawn:
        """The sampler's negatives (the training labels' values steer it), then the mixup lambdas."""
        m = self.cfg.method
        idx = batch.indices.cpu()
        neg_idx = self.sampler.sample(idx, self.train_labels[idx], m.num_negatives, batch.generator)
        lam = None
        if m.latent_mixup:
            n_mix = m.lm_num_mixed or neg_idx.shape[1]
            lam = torch.rand((neg_idx.shape[0], n_mix), generator=batch.generator) * m.lm_lam_max
        return Drawn(batch, neg_idx, lam)

    def loss(self, inputs: Drawn) -> dict[str, torch.Tensor]:
        m = self.cfg.method
        batch, lam = inputs.batch, inputs.lam
        idx = batch.indices.cpu()
        z = self.embed(torch.cat(batch.views, dim=0))
        negs = self.bank[inputs.negatives.to(self.bank.device)]  # [B, K, D], no gradient (a buffer)
        distance = None
        if lam is not None:
            mixed = negs[:, :lam.shape[1]]
            if m.lm_mode != "extra":  # the two views play the student and teacher of the KD form, one lambda
                b = idx.shape[0]
                distance = lm_distance_loss(mix_with_positive(z[:b], mixed, lam), mix_with_positive(z[b:], mixed, lam))
            if m.lm_mode != "distance":
                anchor = self.bank[idx.to(self.bank.device)]  # the image's own (positive) entry
                negs = torch.cat([negs, mix_with_positive(anchor, mixed, lam)], dim=1)
        with torch.autocast(z.device.type, enabled=False):
            loss = bank_supcon_loss(z, batch.labels, negs, m.temperature)
            if distance is not None:
                loss = loss + m.lm_weight * distance
        with torch.no_grad():  # the bank moves to the mean of the two views (momentum, renormalised)
            b = idx.shape[0]
            new = F.normalize((z[:b] + z[b:]).detach(), dim=1)
            mom = m.bank_momentum
            self.bank[idx.to(self.bank.device)] = F.normalize(mom * self.bank[idx.to(self.bank.device)]
                                                              + (1 - mom) * new, dim=1)
        return {"loss": loss}


class SCNSSupConInstance(SCNSSupCon):
    """SCNS-instance negatives: per training image, its k most similar other-class images by the pooled
    backbone features of the row's `teacher:` run (eval mode, the test transform, one pass before training)."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self._source: tuple[Dependency, str] | None = None

    def load_dependencies(self, deps: list[Dependency]) -> None:
        if len(deps) != 1 or deps[0].kind != "teacher":
            raise ValueError("scns_supcon_instance: the row names one run with 'teacher:' (the similarity network)")
        from semcl.methods.distill.teacher import run_backbone

        self._source = (deps[0], run_backbone(deps[0]) or self.cfg.model.backbone)

    def similarity_network(self) -> torch.nn.Module:
        """The teacher run's backbone (its `backbone.*` weights, strictly)."""
        from semcl.methods.distill.teacher import load_backbone_weights

        dep, arch = self._source
        net = build_backbone(arch, in_channels=self.info.in_channels)
        load_backbone_weights(net, dep, arch)
        return net

    @torch.no_grad()
    def on_train_start(self, ctx: TrainContext) -> None:
        from semcl.evals.features import extract_features
        from semcl.methods.distill.teacher import plain_transform

        if self._source is None:
            raise ValueError("scns_supcon_instance: no similarity network (the row's 'teacher:' run) was loaded")
        m = self.cfg.method
        self.train_labels = ctx.train_set.labels.cpu()
        net = self.similarity_network().to(ctx.device).eval()
        images = ctx.train_set.images
        feats = extract_features(lambda x: net(x.to(ctx.device)), images, plain_transform(self.cfg, images.shape[-1]),
                                 batch_size=256).cpu()
        self.sampler = InstanceConditionedNegatives.from_features(feats, self.train_labels, m.k, m.weighting)
        if ctx.run_dir is not None:
            ctx.run_dir.mkdir(parents=True, exist_ok=True)
            torch.save({"pools": self.sampler.pools, "fingerprint": self.sampler.fingerprint()},
                       ctx.run_dir / "scns_negatives.pt")
