"""RINCE's "SCL two heads" baseline (docs/papers/rince.md §c.10): SCL with two projection heads on one backbone.

    L = (1 − λ) · L_fine + λ · L_super,   λ = ``method.weight``

Both terms are single-rank SCL losses (``ranked_info_nce`` with one temperature) in the SCL rows'
MoCo-style setup (semcl.methods.ranked_contrastive): the query is the online projection of view 1,
the anchor's own positive is the momentum key encoder's projection of view 2, every other
candidate comes from a memory bank, and the bank is written with this batch's keys after the loss.

Choices where the paper says nothing (``unknown`` in docs/papers/rince.md §c.10):

* Key encoder: one momentum copy of the backbone and of each head; the key backbone runs once on
  view 2 and feeds both key heads (what a momentum copy of the two-head network computes).
* Memory banks: one per head, each holding that head's keys (the two heads embed into different
  spaces, so one head's keys are no candidates for the other's queries) with their **fine** labels.
  The superclass loss maps the labels through ``fine_to_coarse`` in its rank matrix (rank 1 = same
  superclass, including the same class), so both banks have the same layout as the SCL bank.
* Form: ``in`` by default, for both heads. The paper does not say which SCL form the baseline
  uses; "in" is the SCL schema's default (the SCL-in row) and the form RINCE-in and RINCE-out-in
  give their superclass term, so the two-head baseline treats the superclass level as the paper's
  own method does. ``method.form: out`` gives the SCL-out variant.
* λ: the grid is unknown; the default 0.1 mirrors the one known value of the CE two-heads grid.

The fine-head pieces keep the SCL method's names (``head``, ``key_head``, ``bank``), so an SCL
checkpoint's entries load into them and vice versa; the superclass pieces are ``coarse_*``.
"""

from __future__ import annotations

import torch

from semcl.data.semantics.hierarchy import candidate_ranks
from semcl.losses import ranked_info_nce
from semcl.methods.base import Batch, DataInfo, Method
from semcl.methods.scl_two_heads import SCLTwoHeadsMethod
from semcl.models import MemoryBank, MomentumQueue, ProjectionHead, build_backbone


class SCLTwoHeads(Method):
    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, SCLTwoHeadsMethod)  # form and weight are checked by its schema
        if info.fine_to_coarse is None:
            raise ValueError("scl_two_heads needs a dataset with superclass labels (fine_to_coarse)")

        def head() -> ProjectionHead:
            return ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim,
                                  num_layers=cfg.model.head_layers)

        # Built in the SCL method's order first (same seed -> same fine pieces as an SCL run), then the superclass head.
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = head()
        self.keys = MomentumQueue(m.momentum)
        self.key_backbone = self.keys.copy(self.backbone)
        self.key_head = self.keys.copy(self.head)
        self.bank = self.keys.bank(m.bank_size, cfg.model.head_dim, "fine")
        self.coarse_head = head()
        self.key_coarse_head = self.keys.copy(self.coarse_head)
        self.coarse_bank = self.keys.bank(m.bank_size, cfg.model.head_dim, "coarse")

        f2c = info.fine_to_coarse.to(torch.int64)
        # rank 1: same class (fine head) / same superclass (superclass head); rank 0: negative
        self.register_buffer("fine_ranks", torch.eye(info.num_classes, dtype=torch.int64), persistent=False)
        self.register_buffer("coarse_ranks", (f2c[:, None] == f2c[None, :]).to(torch.int64), persistent=False)
        self.form, self.tau, self.weight = m.form, m.tau, m.weight

    def _scl(self, q: torch.Tensor, k: torch.Tensor, bank: MemoryBank, class_ranks: torch.Tensor,
             labels: torch.Tensor) -> torch.Tensor:
        """One head's SCL loss: own key (rank 1) + bank entries ranked by the labels."""
        sim = torch.cat([(q * k).sum(dim=1, keepdim=True), q @ bank.features.T], dim=1)
        ranks = torch.cat([torch.ones_like(labels)[:, None], candidate_ranks(class_ranks, labels, bank.labels)], dim=1)
        return ranked_info_nce(sim, ranks, [self.tau], form=self.form)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        feats = self.backbone(views[0])
        q_fine, q_coarse = self.head(feats), self.coarse_head(feats)
        with torch.no_grad():
            # key net in train mode: its BN statistics come from its own forward (official code)
            key_feats = self.key_backbone(views[1])
            k_fine, k_coarse = self.key_head(key_feats), self.key_coarse_head(key_feats)
        loss_fine = self._scl(q_fine, k_fine, self.bank, self.fine_ranks, labels)
        loss_coarse = self._scl(q_coarse, k_coarse, self.coarse_bank, self.coarse_ranks, labels)
        loss = (1.0 - self.weight) * loss_fine + self.weight * loss_coarse
        # official order (SCL rows): momentum update after the loss, before the optimiser step
        self.keys.update()
        self.keys.stage(labels, fine=k_fine, coarse=k_coarse)  # the banks are read by this step's graph
        return {"loss": loss, "loss_fine": loss_fine.detach(), "loss_coarse": loss_coarse.detach()}

    def after_backward(self) -> None:
        self.keys.flush()  # both banks take the whole global batch's keys with the fine labels
