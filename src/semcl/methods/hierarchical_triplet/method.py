"""RINCE's "Hierarchical triplet" baseline (Table 2; docs/papers/rince.md §c.10, §d.1): Ge et al.'s
hierarchical triplet loss (ECCV 2018) with the ground-truth CIFAR superclasses as the class tree.

Model and recipe as RINCE's other metric-learning baselines: backbone + the SCL projection head
(Linear–ReLU–Linear, ``model.head_*``), the loss on the L2-normalised projection of one view of the
SCL augmentation; no momentum encoder, no memory bank; the evaluations read ``backbone``.

Loss, margins and statistics: semcl.losses.hierarchical_triplet (formulas, and which are Ge et al.'s
and which are ours). Per step, with the statistics described below::

    α[a, n] = β + d_{H(y_a, y_n)} − s_{y_a}
    L = 1 / (2 Z) Σ_{(a, p, n)} [ d(x_a, x_p) − d(x_a, x_n) + α[a, n] ]_+

Batches (`epoch_order`: semcl.data.sampling.anchor_neighbour_order): l′ anchor
classes with one image each, c images of each anchor class's nearest class, t random images.

Class statistics (our design; Ge et al. rebuild their tree from the whole training set's embeddings,
as recalled, once per epoch): the method never sees the training set, so instead of an extra pass it
accumulates, at every step, the per-class sum and count of the batch's normalised projections (the
training view, under the weights of that step; every DDP rank adds the whole global batch). At the
start of each epoch (``on_epoch_start``, which the train loop calls before it draws the epoch's order)
these accumulators become the epoch's statistics (class means μ_y and counts n_y of the previous
epoch; a class not seen then keeps its older statistics) and are reset, and the nearest class of every
class, ``neighbour_of_class``, is recomputed from them. The sampler reads it through
``sampling_context``. During an epoch the margins use those fixed statistics (as Ge et al.'s per-epoch
tree); a class without any yet (the first epoch) uses the running sums of the current epoch, which
include the current batch, so every class of a batch has statistics. In the first epoch no neighbour
is known and each anchor class gets a uniformly drawn other class.

All of it lives in persistent buffers (accumulators, statistics, neighbour map and the epoch they
belong to), so a checkpoint resumes bit-exactly, also inside an epoch: ``on_epoch_start`` with the epoch
the statistics already belong to changes nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from semcl.data.sampling import anchor_neighbour_order
from semcl.losses.hierarchical_triplet import (
    ClassStatistics,
    class_statistics,
    hierarchical_triplet_loss,
    nearest_classes,
    violate_margins,
)
from semcl.methods.base import Batch, DataInfo, Method
from semcl.methods.hierarchical_triplet import HierarchicalTripletMethod
from semcl.models import ProjectionHead, build_backbone, gather_from_all_ranks


class HierarchicalTriplet(Method):
    num_views = 1

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        assert isinstance(m, HierarchicalTripletMethod)
        if info.fine_to_coarse is None:
            raise ValueError("hierarchical_triplet needs a dataset with superclass labels (fine_to_coarse)")
        if m.l_prime < 1 or m.c < 1 or m.t < 0:
            raise ValueError(f"hierarchical_triplet: need l_prime >= 1, c >= 1, t >= 0; got {m.l_prime}, {m.c}, {m.t}")
        size = m.l_prime + m.l_prime * m.c + m.t
        if size != cfg.optim.batch_size:
            raise ValueError(f"hierarchical_triplet: l_prime + l_prime * c + t = {size} must equal optim.batch_size "
                             f"{cfg.optim.batch_size}")
        if m.l_prime > info.num_classes:
            raise ValueError(f"hierarchical_triplet: l_prime {m.l_prime} exceeds the {info.num_classes} classes")
        self.l_prime, self.c, self.t = int(m.l_prime), int(m.c), int(m.t)
        self.beta, self.squared = float(m.beta), bool(m.squared)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, cfg.model.head_dim,
                                   num_layers=cfg.model.head_layers)
        num, dim = info.num_classes, cfg.model.head_dim
        self.register_buffer("fine_to_coarse", info.fine_to_coarse.to(torch.int64), persistent=False)
        # float64 sums: the statistics do not depend on the order of many float32 additions
        self.register_buffer("epoch_sum", torch.zeros(num, dim, dtype=torch.float64))
        self.register_buffer("epoch_count", torch.zeros(num, dtype=torch.int64))
        self.register_buffer("class_sum", torch.zeros(num, dim, dtype=torch.float64))
        self.register_buffer("class_count", torch.zeros(num, dtype=torch.int64))
        self.register_buffer("neighbour_of_class", torch.full((num,), -1, dtype=torch.int64))
        self.register_buffer("stats_epoch", torch.tensor(-1, dtype=torch.int64))

    @property
    def sampling_context(self) -> dict:
        """What semcl.data.sampling.anchor_neighbour_order needs, on the CPU."""
        return {"l_prime": self.l_prime, "c": self.c, "t": self.t,
                "neighbour_of_class": self.neighbour_of_class.detach().cpu()}

    @torch.no_grad()
    def epoch_order(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator,
                    batch_size: int) -> torch.Tensor:
        """Anchor-neighbour batches of l' + l'c + t images (semcl.data.sampling.anchor_neighbour_order)."""
        return anchor_neighbour_order(labels, num_classes, batch_size, generator, **self.sampling_context)

    def on_epoch_start(self, epoch: int) -> None:
        """The previous epoch's accumulators become the statistics; the neighbour map follows them."""
        if int(self.stats_epoch) == epoch:  # resumed inside this epoch: already done
            return
        seen = self.epoch_count > 0
        self.class_sum[seen] = self.epoch_sum[seen]
        self.class_count[seen] = self.epoch_count[seen]
        self.epoch_sum.zero_()
        self.epoch_count.zero_()
        stats = class_statistics(self.class_sum, self.class_count, self.fine_to_coarse)
        self.neighbour_of_class.copy_(nearest_classes(stats.distance, stats.valid))
        self.stats_epoch.fill_(epoch)

    @torch.no_grad()
    def statistics(self) -> ClassStatistics:
        """The statistics the margins use now: the epoch's, else (class not seen before) the running sums."""
        fixed = self.class_count > 0
        sums = torch.where(fixed[:, None], self.class_sum, self.epoch_sum)
        counts = torch.where(fixed, self.class_count, self.epoch_count)
        return class_statistics(sums, counts, self.fine_to_coarse)

    @torch.no_grad()
    def _accumulate(self, z: torch.Tensor, labels: torch.Tensor) -> None:
        z, labels = gather_from_all_ranks(z), gather_from_all_ranks(labels)
        # scatter and a column sum, not F.one_hot and bincount: those read the labels back on the host
        onehot = torch.zeros(len(labels), len(self.epoch_count), dtype=torch.float64, device=z.device)
        onehot.scatter_(1, labels[:, None], 1.0)
        self.epoch_sum += onehot.T @ z.to(torch.float64)  # a matmul, not index_add_: no atomics on the GPU
        self.epoch_count += onehot.sum(0).to(self.epoch_count.dtype)  # exact: whole numbers in float64

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        views, labels = batch.views, batch.labels
        z = self.head(self.backbone(views[0]))
        z = F.normalize(z.float() if z.dtype in (torch.float16, torch.bfloat16) else z, dim=1)  # loss outside autocast
        with torch.autocast(z.device.type, enabled=False):
            self._accumulate(z.detach(), labels)
            stats = self.statistics()
            margins = violate_margins(labels, self.fine_to_coarse, stats.thresholds, stats.intra, self.beta)
            loss = hierarchical_triplet_loss(z, labels, margins.to(z.dtype), squared=self.squared)
        return {"loss": loss, "d_same_superclass": stats.thresholds[0].detach(),
                "d_other_superclass": stats.thresholds[1].detach()}
