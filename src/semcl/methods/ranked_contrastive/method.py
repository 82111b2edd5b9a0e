"""SCL and RINCE with a momentum key encoder and a memory bank of keys and labels.

Setup of RINCE's official CIFAR code (MoCo-style): the query is the online encoder's
projection of view 1, the anchor's own positive is the key encoder's projection of view 2,
and every other candidate comes from the memory bank; other samples of the current batch are
not candidates. The bank is updated with this batch's keys after the loss is computed.
SCL is the single-rank case (rank 1 = same class); RINCE adds rank 2 = same superclass (CIFAR-100)
or = classes whose names are similar (ImageNet-100, ``method.ranks: names``, docs/papers/rince.md §c.6) with
its own, higher temperature. With name ranks the class-name similarity matrix is written into the
run folder (class_name_similarity.csv) and its sha256 into the log at the start of training.
"""

from __future__ import annotations

import logging

import torch

from semcl.data.imagenet100 import words_of_wnids
from semcl.data.semantics.hierarchy import candidate_ranks, rank_matrix, superclass_similarity, threshold_similarity
from semcl.data.semantics.name_similarity import (
    THRESHOLDS,
    class_name_similarity,
    load_similarity,
    save_similarity,
    similarity_sha256,
)
from semcl.errors import ConfigError
from semcl.losses import key_first_rank_only, ranked_info_nce
from semcl.methods.base import Batch, DataInfo, Method, TrainContext
from semcl.methods.ranked_contrastive import RinceMethod, SCLMethod
from semcl.models import MomentumQueue, ProjectionHead, build_backbone

log = logging.getLogger("semcl.rince")
SIMILARITY_FILE = "class_name_similarity.csv"  # written into the run folder with name ranks


def name_similarity(m: RinceMethod, info: DataInfo) -> tuple[list[str], torch.Tensor]:
    """(class names, [C, C] float64 class-name similarity) for ``ranks: names``: the user's file
    (rows matched by name) or the sentence transformer ``m.name_model``; checked against the pin."""
    if info.class_names is None:
        raise ValueError("RINCE with ranks 'names' needs a dataset with class names (DataInfo.class_names)")
    names = words_of_wnids(list(info.class_names))  # ImageNet folders name classes by wnid
    if m.name_similarity_file is not None:
        names, sim = load_similarity(m.name_similarity_file, names)
    else:
        sim = class_name_similarity(names, m.name_model)
    if m.name_similarity_sha256 is not None:
        got = similarity_sha256(sim, names)
        if got != m.name_similarity_sha256:
            source = m.name_similarity_file or m.name_model
            raise ConfigError(f"{source}: class-name similarity has sha256 {got}, the config's "
                              f"'method.name_similarity_sha256' pins {m.name_similarity_sha256}")
    return names, sim


def _class_similarity(m, info: DataInfo, name_sim: torch.Tensor | None) -> torch.Tensor:
    if isinstance(m, SCLMethod):
        return torch.eye(info.num_classes)
    if m.ranks == "superclass":
        if info.fine_to_coarse is None:
            raise ValueError("RINCE with superclass ranks needs a dataset with superclass labels")
        return superclass_similarity(info.fine_to_coarse, sibling_sim=m.sibling_sim)
    if m.ranks == "names":
        assert name_sim is not None
        threshold = THRESHOLDS[m.name_threshold] if isinstance(m.name_threshold, str) else m.name_threshold
        return threshold_similarity(name_sim, float(threshold))
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
        self.name_sim: tuple[list[str], torch.Tensor] | None = None
        if isinstance(m, RinceMethod) and m.ranks == "names":
            self.name_sim = name_similarity(m, info)
        ranks, levels = rank_matrix(_class_similarity(m, info, self.name_sim[1] if self.name_sim else None))
        self.register_buffer("class_ranks", ranks, persistent=False)
        floor = m.prob_floor if m.prob_floor is not None else 0.0
        if isinstance(m, SCLMethod):
            self.taus = [m.tau]
            self.form, self.positives, self.reduction, self.key_only_first = m.form, "rank", "sum", False
        else:
            assert isinstance(m, RinceMethod)
            # name ranks: a threshold may leave no similar pair, so rank 2 may be empty (its term is 0)
            fits = len(m.taus) >= len(levels) if m.ranks == "names" else len(m.taus) == len(levels)
            if not fits:
                raise ValueError(f"method.taus has {len(m.taus)} temperatures for {len(levels)} ranks {levels}")
            self.taus = list(m.taus)
            self.form, self.positives, self.reduction = m.loss_form, m.positives, m.rank_reduction
            self.key_only_first = m.key_first_rank_only
        self.prob_floor = float(floor)
        self.update_first = m.key_update == "before_keys"

    def on_train_start(self, ctx: TrainContext) -> None:
        """Write the class-name similarity (name ranks) into the run folder; log its sha256."""
        if self.name_sim is None:
            return
        names, sim = self.name_sim
        digest = similarity_sha256(sim, names)
        if ctx.run_dir is not None:
            save_similarity(ctx.run_dir / SIMILARITY_FILE, names, sim)
        n_pairs = int(((self.class_ranks == 2).sum()) // 2)
        log.info("class-name similarity sha256 %s (%d similar class pairs)%s", digest, n_pairs,
                 f", written to {ctx.run_dir / SIMILARITY_FILE}" if ctx.run_dir is not None else "")

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        q = self.head(self.backbone(views[0]))
        with torch.no_grad():
            if self.update_first:  # ImageNet branch: EMA step before the keys (losses.py:104)
                self.keys.update()
            # key net in train mode: its BN statistics come from its own forward (official code)
            k = self.key_head(self.key_backbone(views[1]))
        own = (q * k).sum(dim=1, keepdim=True)
        sim = torch.cat([own, q @ self.bank.features.T], dim=1)
        bank_ranks = candidate_ranks(self.class_ranks, labels, self.bank.labels)
        ranks = torch.cat([torch.ones_like(labels)[:, None], bank_ranks], dim=1)
        kwargs = dict(form=self.form, positives=self.positives, rank_reduction=self.reduction,
                      prob_floor=self.prob_floor)
        if self.key_only_first:
            loss = key_first_rank_only(sim, ranks, self.taus, key_col=0, **kwargs)
        else:
            loss = ranked_info_nce(sim, ranks, self.taus, **kwargs)
        # CIFAR branch order: momentum update and enqueue after the loss, before the optimiser step
        if not self.update_first:
            self.keys.update()
        self.keys.stage(labels, keys=k)  # enqueued after backward (the bank is read by this step's graph)
        return {"loss": loss}

    def after_backward(self) -> None:
        self.keys.flush()
