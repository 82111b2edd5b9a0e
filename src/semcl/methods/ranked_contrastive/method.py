"""SCL and RINCE with a momentum key encoder and a memory bank of keys and labels.

Setup of RINCE's official CIFAR code (MoCo-style): the query is the online encoder's
projection of view 1, the anchor's own positive is the key encoder's projection of view 2,
and every other candidate comes from the memory bank; other samples of the current batch are
not candidates. The bank is updated with this batch's keys after the loss is computed.
SCL is the single-rank case (rank 1 = same class); RINCE adds rank 2 = same superclass with
its own, higher temperature.
"""

from __future__ import annotations

import torch

from semcl.data.hierarchy import candidate_ranks, rank_matrix, superclass_similarity
from semcl.losses import key_first_rank_only, ranked_info_nce
from semcl.methods.base import Batch, DataInfo, Method
from semcl.methods.ranked_contrastive import RinceMethod, SCLMethod
from semcl.models import MomentumQueue, ProjectionHead, build_backbone


def _class_similarity(m, info: DataInfo) -> torch.Tensor:
    if isinstance(m, SCLMethod):
        return torch.eye(info.num_classes)
    if m.ranks == "superclass":
        if info.fine_to_coarse is None:
            raise ValueError("RINCE with superclass ranks needs a dataset with superclass labels")
        return superclass_similarity(info.fine_to_coarse, sibling_sim=m.sibling_sim)
    raise ValueError(f"unknown rank construction {m.ranks!r}")


class RankedContrastive(Method):
    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim,
                                   num_layers=cfg.model.head_layers)
        self.keys = MomentumQueue(m.momentum)
        self.key_backbone = self.keys.copy(self.backbone)
        self.key_head = self.keys.copy(self.head)
        self.bank = self.keys.bank(m.bank_size, cfg.model.head_dim)
        ranks, levels = rank_matrix(_class_similarity(m, info))
        self.register_buffer("class_ranks", ranks, persistent=False)
        if isinstance(m, SCLMethod):
            self.taus = [m.tau]
            self.form, self.positives, self.reduction, self.key_only_first = m.form, "rank", "sum", False
        else:
            assert isinstance(m, RinceMethod)
            if len(m.taus) != len(levels):
                raise ValueError(f"method.taus has {len(m.taus)} temperatures for {len(levels)} ranks {levels}")
            self.taus = list(m.taus)
            self.form, self.positives, self.reduction = m.form, m.positives, m.rank_reduction
            self.key_only_first = m.key_first_rank_only

    def training_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        q = self.head(self.backbone(views[0]))
        with torch.no_grad():
            # key net in train mode: its BN statistics come from its own forward (official code)
            k = self.key_head(self.key_backbone(views[1]))
        own = (q * k).sum(dim=1, keepdim=True)
        sim = torch.cat([own, q @ self.bank.features.T], dim=1)
        bank_ranks = candidate_ranks(self.class_ranks, labels, self.bank.labels)
        ranks = torch.cat([torch.ones_like(labels)[:, None], bank_ranks], dim=1)
        kwargs = dict(form=self.form, positives=self.positives, rank_reduction=self.reduction)
        if self.key_only_first:
            loss = key_first_rank_only(sim, ranks, self.taus, key_col=0, **kwargs)
        else:
            loss = ranked_info_nce(sim, ranks, self.taus, **kwargs)
        # official order: momentum update and enqueue after the loss, before the optimiser step
        self.keys.update()
        self.keys.stage(labels, keys=k)  # enqueued after backward (the bank is read by this step's graph)
        return {"loss": loss}

    def after_backward(self) -> None:
        self.keys.flush()
