"""HSA / CsMl on a MoCo v2 base, and MoCo v2 itself (docs/papers/hsa.md §c).

Per step (anchor images x_a with the engine's two views; the neighbour x_p drawn from the kNN table):

    q_a = f_q(view_q(x_a))   k_a = f_k(view_k(x_a))        (MoCo v2: InfoNCE(q_a, k_a, queue))
    q_p = f_q(view_q(x_p))   k_p = f_k(view_k(x_p))        (kNN positives, §c.2-c.3)
    q_mix = f_q(M * view_q(x_a) + (1 - M) * view_q(x_p))    (CutMix between neighbours, §c.4)
    L = hsa_loss(q_a, q_p, k_a, k_p, queue; q_mix, lambda) + w_stage * sum_l hsa_loss at stage l  (§c.5-c.6)

f_q = projection head o backbone (MoCo v2 head: Linear-ReLU-Linear -> 128, L2-normalised), f_k its
momentum copy (EMA m). Each query pass is its own forward (BN statistics per view batch, as MoCo's
separate encoder calls); keys go through shuffle-BN under DDP. Only k_a (and each stage's k_a^l) is
enqueued, with label 0 (the queue's labels are unused; 0 keeps MemoryBank.filled honest).

kNN mining (`on_epoch_start`, epochs 0, refresh, 2 refresh, ...): features of every training image
under the deterministic test transform from f_q's or f_k's backbone in eval mode (BN running statistics, as
the official clustering.py:16 compute_feat calls model.eval()), chunked; `semcl.data.semantics.knn_shards` gives the
N x k table of `semcl.data.semantics.neighbours.knn_table` (under DDP each rank searches a share of the queries, and a
requeue signal stops it between chunks), kept as a buffer so a checkpoint carries it and a resumed run (also
one resumed inside a mining epoch) uses the same neighbours.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from semcl.data import stats
from semcl.data.semantics.knn_shards import sharded_knn_table
from semcl.data.semantics.neighbours import draw_neighbours, knn_table, pick_neighbours
from semcl.data.views.build import build_augment
from semcl.data.views.cutmix import Cut, draw_cut, paste
from semcl.evals.stage_pooling import pooled_stage_features
from semcl.losses.hsa import byol_regression, hsa_loss, info_nce, multi_positive_hsa_loss, neighbour_weights, two_positive_loss
from semcl.methods.base import SHAPES_ONLY_IMAGES, Batch, DataInfo, Method, TrainContext, repeat_rows, training_images
from semcl.methods.hsa import HSAMethod, MoCoV2Method
from semcl.models import MomentumQueue, ProjectionHead, build_backbone, shuffled_forward
from semcl.models.stage_heads import build_stage_heads
from semcl.models.stages import stage_channels, stage_names, stage_outputs
from semcl.runtime import distributed, interrupt


def hsa_knobs(m: HSAMethod | MoCoV2Method) -> HSAMethod:
    """The full knob set; MoCo v2 is HSA with kNN positives, CutMix and companion losses off."""
    if isinstance(m, MoCoV2Method):
        return HSAMethod(queue_size=m.queue_size, tau=m.tau, momentum=m.momentum, neighbours=False, cutmix=False,
                         companions=False)
    return m


class NeighbourTable(nn.Module):
    """int64 [N, k] neighbour table and the epoch it was mined on (-1: never), as buffers.

    N is only known once the training set is, so a state dict's table replaces the empty one on load.
    """

    table: torch.Tensor
    epoch: torch.Tensor

    def __init__(self, k: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(0, k, dtype=torch.long))
        self.register_buffer("epoch", torch.tensor(-1, dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        incoming = state_dict.get(prefix + "table")
        if incoming is not None and incoming.shape != self.table.shape:
            self.table = torch.zeros_like(incoming, device=self.table.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def set(self, table: torch.Tensor, epoch: int) -> None:
        self.table = table.to(self.table.device)
        self.epoch.fill_(epoch)


def _f32(t: torch.Tensor) -> torch.Tensor:
    """Half-precision outputs (optim.amp) to float32 for the losses; float32 / float64 stay as they are."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _direct_branch(channels: int, out_dim: int) -> nn.Module:
    """Stage loss attached directly (ablation): global average pool + 2-layer MLP, no bottleneck."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), ProjectionHead(channels, channels, out_dim))


class Neighbours(NamedTuple):
    """A step's host work (HSA.prepare): the batch, each positive's (query view, key view) on the device (one pair
    per positive; none without kNN positives) and its CutMix boxes (none without CutMix)."""

    batch: Batch
    views: list[tuple[torch.Tensor, torch.Tensor]]
    cuts: list[Cut]


class HSA(Method):
    """`hsa` and `mocov2` (module docstring)."""

    num_views = 2

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = self.knobs = hsa_knobs(cfg.method)
        dim = cfg.model.head_dim
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.head = ProjectionHead(self.backbone.out_dim, cfg.model.head_hidden, dim, num_layers=2)
        self.stages: list[str] = list(m.stages) if m.companions else []
        if self.stages:
            if m.stage_branch == "bottleneck":
                self.stage_heads = build_stage_heads(self.backbone, self.stages, dim)
            else:
                channels = stage_channels(self.backbone)
                self.stage_heads = nn.ModuleDict({s: _direct_branch(channels[s], dim) for s in self.stages})
        self.keys = MomentumQueue(m.momentum)
        self.key_backbone = self.keys.copy(self.backbone)
        self.key_head = self.keys.copy(self.head)
        self.key_stage_heads = self.keys.copy(self.stage_heads) if self.stages else None
        self.bank = self.keys.bank(m.queue_size, dim)
        self.stage_banks = nn.ModuleDict({s: self.keys.bank(m.queue_size, dim, name=s) for s in self.stages})
        self.neighbours = NeighbourTable(m.k) if m.neighbours else None
        if m.loss_form == "byol":  # BYOL's predictor: Linear - BN - ReLU - Linear on the online projection
            self.predictor = nn.Sequential(nn.Linear(dim, cfg.model.head_hidden, bias=False),
                                           nn.BatchNorm1d(cfg.model.head_hidden), nn.ReLU(inplace=True),
                                           nn.Linear(cfg.model.head_hidden, dim))
        self._ctx: TrainContext | None = None

    # ---- encoders ----------------------------------------------------------------------------
    def _encode(self, backbone: nn.Module, head: nn.Module, stage_heads: nn.ModuleDict | None,
                x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(128-d embedding of the pooled last stage, {stage: companion embedding}), at least float32."""
        if not self.stages:
            return _f32(head(backbone(x))), {}
        maps = stage_outputs(backbone, x)
        pooled = torch.flatten(F.adaptive_avg_pool2d(maps[stage_names(backbone)[-1]], 1), 1)  # = backbone(x)
        return _f32(head(pooled)), {s: _f32(stage_heads[s](maps[s])) for s in self.stages}

    def _query(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.knobs.loss_form == "byol":  # online side: projection (unnormalised) -> predictor; no companions
            return _f32(self.predictor(self.head.net(self.backbone(x)))), {}
        return self._encode(self.backbone, self.head, getattr(self, "stage_heads", None), x)

    @torch.no_grad()
    def _key(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Keys through shuffle-BN: last-layer and stage keys travel as one [B, (1 + S) D] tensor."""
        def fn(v: torch.Tensor) -> torch.Tensor:
            z, st = self._encode(self.key_backbone, self.key_head, self.key_stage_heads, v)
            return torch.cat([z, *(st[s] for s in self.stages)], dim=1)

        parts = shuffled_forward(fn, x).split(self.cfg.model.head_dim, dim=1)
        return parts[0], dict(zip(self.stages, parts[1:], strict=True))

    # ---- kNN positives -----------------------------------------------------------------------
    def on_train_start(self, ctx: TrainContext) -> None:
        self._ctx = ctx
        m = self.knobs
        if m.multicrop:
            from semcl.data.views.multicrop import SWAV_SIZE_RATIO, SWAV_SMALL_SCALE, small_crop_view

            side = ctx.train_set.images.shape[-1]
            small = max(8, round(side * (m.multicrop_size or SWAV_SIZE_RATIO)))
            self._small_view = small_crop_view(ctx.augment[0], small, m.multicrop_scale or SWAV_SMALL_SCALE)
        if self.neighbours is not None and self.neighbours.table.shape[0] not in (0, len(ctx.train_set.labels)):
            raise ValueError(f"the checkpoint's kNN table has {self.neighbours.table.shape[0]} rows but the training "
                             f"set has {len(ctx.train_set.labels)} images")

    def on_epoch_start(self, epoch: int) -> None:
        if self.neighbours is None:
            return
        mined = int(self.neighbours.epoch)
        # a resume inside a mining epoch finds that epoch's table in the checkpoint: keep it
        if (epoch % self.knobs.refresh == 0 and mined != epoch) or mined < 0:
            self.mine(epoch)

    def mining_features(self) -> torch.Tensor:
        """[N, D] float32 backbone features of every training image (test transform), on the method's device;
        under DDP each rank encodes a contiguous shard and the shards are gathered into one buffer. A shapes-only
        run (the preflight's memory check) encodes SHAPES_ONLY_IMAGES and repeats them: the table's shape is what
        its step reads."""
        if self._ctx is None:
            raise RuntimeError("kNN mining needs the training set: on_train_start was not called")
        images = self._ctx.train_set.images
        if self._ctx.shapes_only:
            return repeat_rows(self._encoded(images[:SHAPES_ONLY_IMAGES]), images.shape[0])
        return self._encoded(images)

    def _encoded(self, images: torch.Tensor) -> torch.Tensor:
        n, bs = images.shape[0], self.knobs.mining_batch
        mean, std = stats(self.cfg.data.name)
        tf = build_augment("test", size=images.shape[-1], mean=mean, std=std)
        encoder = self.backbone if self.knobs.features == "query" else self.key_backbone
        device, dtype = next(encoder.parameters()).device, next(encoder.parameters()).dtype
        per = math.ceil(n / distributed.world_size())
        lo, hi = min(n, distributed.rank() * per), min(n, (distributed.rank() + 1) * per)
        gen = torch.Generator().manual_seed(0)  # the test transform draws nothing
        shard = torch.zeros(per, encoder.out_dim, device=device)  # a short last shard: zero padding, cut below
        was_training = encoder.training
        encoder.eval()
        try:
            for i in range(lo, hi, bs):
                j = min(i + bs, hi)
                shard[i - lo:j - lo] = encoder(tf(images[i:j], gen).to(device, dtype)).float()
        finally:
            encoder.train(was_training)
        return distributed.gather_rows(shard)[:n]

    @torch.no_grad()
    def mine(self, epoch: int) -> None:
        """Recompute the N x k table, the same on every rank. torch backend: each rank searches its share of
        the queries and the table is gathered (semcl.data.semantics.knn_shards); a requeue signal that comes meanwhile
        abandons the mining between chunks (interrupt.Abandoned: the loop checkpoints, a resumed run mines
        again). faiss: rank 0 searches, the table is broadcast."""
        features = self.mining_features()
        if self.knobs.knn_backend == "faiss":
            n, k = features.shape[0], self.knobs.k
            table = knn_table(features, k, backend="faiss") if distributed.rank() == 0 else \
                torch.empty(n, k, dtype=torch.long)
            table = table.to(features.device)
            if distributed.is_distributed():
                dist.broadcast(table, src=0)
        else:
            table = sharded_knn_table(features, self.knobs.k, fast=self.cfg.optim.precision == "fast",
                                      stop=lambda: distributed.any_rank(interrupt.pending(), features.device))
            if table is None:
                raise interrupt.Abandoned(f"kNN mining of epoch {epoch}: a stop signal is pending")
        self.neighbours.set(table, epoch)

    def _neighbour_views(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """One neighbour per anchor (uniform over its k, from the epoch's generator) in two augmented views."""
        if self._ctx is None or self.neighbours.table.shape[0] == 0:
            raise RuntimeError("no kNN table yet: on_train_start and on_epoch_start must run before a step")
        if batch.partner_views:  # made by the file loader
            return batch.partner_views[0]
        picked = draw_neighbours(self.neighbours.table.cpu(), batch.generator, batch.indices.cpu())
        images = training_images(self._ctx.train_set)[picked]
        augs, device = self._ctx.augment, batch.views[0].device
        view_q = augs[0](images, batch.generator).to(device)
        view_k = augs[1 % len(augs)](images, batch.generator).to(device)
        return view_q, view_k

    def _several_neighbour_views(self, batch: Batch, m: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """m distinct neighbours per anchor (the first m of a uniform permutation of its k), two views each."""
        if self._ctx is None or self.neighbours.table.shape[0] == 0:
            raise RuntimeError("no kNN table yet: on_train_start and on_epoch_start must run before a step")
        if batch.partner_views:  # made by the file loader
            return list(batch.partner_views[:m])
        rows = self.neighbours.table.cpu()[batch.indices.cpu()]  # [B, k]
        cols = torch.rand(rows.shape, generator=batch.generator).argsort(dim=1)[:, :m]
        picked = rows.gather(1, cols)  # [B, m]
        augs, device = self._ctx.augment, batch.views[0].device
        out = []
        for j in range(m):
            images = training_images(self._ctx.train_set)[picked[:, j]]
            out.append((augs[0](images, batch.generator).to(device),
                        augs[1 % len(augs)](images, batch.generator).to(device)))
        return out

    def view_recipes(self, augs) -> list:
        """The two global views, then method.multicrop small crops of the same images (multi-crop)."""
        small = [self._small_view] * self.knobs.multicrop if self.knobs.multicrop else []
        return super().view_recipes(augs) + small

    def loader_partners(self):
        """File-backed sets: the loader draws each anchor's neighbours (uniform over its k, `positives` of
        them distinct) and makes their two views, from the table mined at this epoch's start."""
        if self.neighbours is None or self._ctx is None or self.neighbours.table.shape[0] == 0:
            return None
        augs = self._ctx.augment
        pick = functools.partial(pick_neighbours, self.neighbours.table.cpu().clone(), self.knobs.positives or 1)
        return pick, [augs[0], augs[1 % len(augs)]]

    def _small_crop_terms(self, batch: Batch, k_a, k_p, queue, kw) -> list[torch.Tensor]:
        """One loss per small crop (the query encoder's last layer; companions read global views only): the
        anchor's own loss with the crop as query -- InfoNCE to k_a (MoCo v2), or the two-positive term to
        (k_a, k_p) with the anchor's weights (CsMl)."""
        out = []
        for x in batch.views[2:]:
            q_s = _f32(self.head(self.backbone(x)))
            if k_p is None:
                out.append(info_nce(q_s, k_a, queue, self.knobs.tau).mean())
            else:
                out.append(two_positive_loss(q_s, k_a, k_p, queue, self.knobs.tau, *kw["weights"], form=kw["form"]))
        return out

    # ---- training ----------------------------------------------------------------------------
    def prepare(self, batch: Batch) -> Neighbours:
        """Host work of a step with kNN positives: each anchor's neighbours picked and their two views made (or the
        file loader's), then the CutMix boxes, in the official order of draws."""
        m = self.knobs
        if not m.neighbours:
            return Neighbours(batch, [], [])
        several = (m.positives or 1) > 1
        views = self._several_neighbour_views(batch, m.positives) if several else [self._neighbour_views(batch)]
        cuts = []
        if m.cutmix:
            b, _, h, w = batch.views[0].shape
            cuts = [draw_cut(b, h, w, batch.mixing_generator, alpha=m.cutmix_alpha, mode=m.cutmix_mode)
                    for _ in views]
        return Neighbours(batch, views, cuts)

    def loss(self, inputs: Neighbours) -> dict[str, torch.Tensor]:
        m, batch = self.knobs, inputs.batch
        q_a, qs_a = self._query(batch.views[0])
        with torch.no_grad():
            self.keys.update()  # MoCo order: EMA step, then this step's keys
            k_a, ks_a = self._key(batch.views[1])
        queues = {"": self.bank.features, **{s: self.stage_banks[s].features for s in self.stages}}
        out: dict[str, torch.Tensor] = {}
        with torch.autocast(q_a.device.type, enabled=False):  # the losses run in float32 (optim.amp)
            if not m.neighbours and m.loss_form == "byol":  # BYOL: one direction per pair, as MoCo v2 here
                terms = {"": byol_regression(q_a, k_a).mean()}
            elif not m.neighbours:  # MoCo v2
                terms = {"": info_nce(q_a, k_a, queues[""], m.tau).mean(),
                         **{s: info_nce(qs_a[s], ks_a[s], queues[s], m.tau).mean() for s in self.stages}}
                if m.multicrop:  # small crops: more queries of the anchor's key, summed
                    terms[""] = terms[""] + sum(self._small_crop_terms(batch, k_a, None, queues[""], {}))
            elif (m.positives or 1) > 1:
                terms = self._several_positives_terms(inputs, q_a, qs_a, k_a, ks_a, queues, out)
            else:
                (view_q, view_k), = inputs.views
                q_p, qs_p = self._query(view_q)
                k_p, ks_p = self._key(view_k)
                q_mix, qs_mix, lam = None, {}, None
                if m.cutmix:
                    mixed = paste(batch.views[0], view_q, inputs.cuts[0])
                    q_mix, qs_mix = self._query(mixed.images)
                    lam = mixed.lam.to(q_a.device, q_a.dtype)
                kw = dict(self._loss_kw(batch.epoch), lam=lam)
                last = hsa_loss(q_a, q_p, k_a, k_p, queues[""], m.tau, q_mix=q_mix, **kw)
                out.update({k: v.detach() for k, v in last.items() if k != "loss"})
                terms = {"": last["loss"]}
                if m.multicrop:  # one more term per small crop (HSAMethod.multicrop_reduction)
                    crops = self._small_crop_terms(batch, k_a, k_p, queues[""], kw)
                    if m.multicrop_reduction == "split":  # the global terms as single-crop rows weigh them
                        terms[""] = last["loss"] + sum(crops) / len(crops)
                    else:  # "all": one reduction over the global and the small-crop terms
                        parts = [v for k, v in last.items() if k != "loss"] + crops
                        terms[""] = sum(parts) / (len(parts) if m.reduction == "mean" else 1)
                for s in self.stages:
                    terms[s] = hsa_loss(qs_a[s], qs_p[s], ks_a[s], ks_p[s], queues[s], m.tau,
                                        q_mix=qs_mix.get(s), **kw)["loss"]
        loss = terms[""] + sum(m.stage_weight * terms[s] for s in self.stages)
        out.update({f"loss_{s}": terms[s].detach() for s in self.stages})
        # the queues are read by this step's graph: written after backward (label 0: labels unused)
        self.keys.stage(torch.zeros_like(batch.labels), keys=k_a, **ks_a)
        return {"loss": loss, **out}

    def _loss_kw(self, epoch: int) -> dict:
        """The keyword arguments every HSA loss call shares: this epoch's (own, neighbour) weights, form, reduction."""
        m = self.knobs
        return dict(weights=neighbour_weights(epoch, own=m.own_weight, other=m.neighbour_weight,
                                              warmup_epochs=m.warmup_epochs),
                    form=m.loss_form, reduction=m.reduction)

    def _several_positives_terms(self, inputs, q_a, qs_a, k_a, ks_a, queues, out) -> dict[str, torch.Tensor]:
        """The last layer's and each stage's loss with method.positives neighbours (multi_positive_hsa_loss)."""
        m, batch = self.knobs, inputs.batch
        q_ps, qs_ps, k_ps, ks_ps, q_mix, qs_mix, lams = [], [], [], [], [], [], []
        for j, (view_q, view_k) in enumerate(inputs.views):
            q, qs = self._query(view_q)
            k, ks = self._key(view_k)
            q_ps.append(q)
            qs_ps.append(qs)
            k_ps.append(k)
            ks_ps.append(ks)
            if m.cutmix:
                mixed = paste(batch.views[0], view_q, inputs.cuts[j])
                qm, qsm = self._query(mixed.images)
                q_mix.append(qm)
                qs_mix.append(qsm)
                lams.append(mixed.lam.to(q_a.device, q_a.dtype))
        kw = dict(self._loss_kw(batch.epoch), lams=lams if m.cutmix else None)
        last = multi_positive_hsa_loss(q_a, q_ps, k_a, k_ps, queues[""], m.tau, q_mixes=q_mix if m.cutmix else None,
                                       **kw)
        out.update({k: v.detach() for k, v in last.items() if k != "loss"})
        terms = {"": last["loss"]}
        for s in self.stages:
            terms[s] = multi_positive_hsa_loss(qs_a[s], [x[s] for x in qs_ps], ks_a[s], [x[s] for x in ks_ps],
                                               queues[s], m.tau,
                                               q_mixes=[x[s] for x in qs_mix] if m.cutmix else None, **kw)["loss"]
        return terms

    def after_backward(self) -> None:
        self.keys.flush()

    # ---- evaluation --------------------------------------------------------------------------
    def stage_features(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Pooled query-backbone maps per stage for the per-stage probes (HSA Fig. 3, stage_pooling)."""
        return pooled_stage_features(self.backbone, x)


def mining_search(method: HSA) -> tuple[int, int, str] | None:
    """(D, k, backend) of the kNN search over the features of every training image that an HSA run makes at each
    refresh, for the preflight's memory figure (the spec's StandIn.mining); None where the run mines nothing (no
    kNN positives: an ablation's row)."""
    if method.neighbours is None:
        return None
    encoder = method.backbone if method.knobs.features == "query" else method.key_backbone
    return int(encoder.out_dim), method.knobs.k, method.knobs.knn_backend
