"""Video pre-training (InfoNCE / HP / HN / RINCE) and fine-tuning on clips.

Views: the epoch generator draws the clip positions (ClipSampler: x_f, x_s, x_v) and then the clip
augmentations (ClipAugment, one parameter set per clip), so a resumed run replays the same clips.
Views of the pre-training methods, in order: anchor (x_f's frames, augmentation 1), x_f (same frames,
augmentation 2), x_s, x_v. The engine takes them in three parts (semcl.data.views.clip_loader):
`clip_plan` draws positions and augmentation parameters in the training process, `decode_plan`
decodes a rank's clips in loader workers, `finish_views` augments on the training device.
`make_views` makes the same views in one call (the path of sets without a fixed frame size, whose
augmentation draws need the decoded frames' size).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from semcl.data.video import ClipAugment, ClipSampler
from semcl.data.views.augment import RECIPES
from semcl.data.views.clip_loader import ClipViews, decode_clips, finish_clip_views
from semcl.losses import ranked_info_nce
from semcl.losses.video_ranks import video_ranks, video_similarities
from semcl.methods.base import Batch, DataInfo
from semcl.methods.clips import ClipMethod
from semcl.models import MomentumQueue
from semcl.models.video import build_video_backbone

KINDS = {"video_infonce": "infonce", "video_hp": "hp", "video_hn": "hn", "video_rince": "rince"}


def clip_sampler(m: Any) -> ClipSampler:
    return ClipSampler(m.num_frames, m.stride, m.min_gap, positive=m.positive, max_shift=m.max_shift)


def clip_augment(cfg: Any, train_set: Any) -> ClipAugment:
    """The run's view recipe (data.augment) on clips, at the frame height, with the dataset's statistics."""
    from semcl.data import stats

    mean, std = stats(cfg.data.name)
    recipe = cfg.data.augment.split("+")[0]
    return ClipAugment(RECIPES[recipe], size=train_set.images.shape[2], mean=mean, std=std)


class _VideoMethod(ClipMethod):
    """Adam (lr, weight decay from optim.*: RINCE video uses Adam, §d.3)."""

    def configure_optimizer(self, optim) -> torch.optim.Optimizer | None:
        params = [p for p in self.parameters() if p.requires_grad]
        return torch.optim.Adam(params, lr=optim.lr, weight_decay=optim.weight_decay) if params else None

    def _augment(self, train_set: Any) -> ClipAugment:
        if getattr(self, "_aug", None) is None:
            self._aug = clip_augment(self.cfg, train_set)
        return self._aug

    def _plan(self, train_set: Any, idx: torch.Tensor, frames: torch.Tensor, views: tuple[int, ...],
              generator: torch.Generator, gap_ok: torch.Tensor | None = None) -> ClipViews:
        """The augmentation draws of each view (cut from clip `views[k]`), in view order, after the positions."""
        aug, (h, w) = self._augment(train_set), train_set.frame_size
        return ClipViews(idx, frames, tuple((k, aug.draw(len(idx), h, w, generator)) for k in views), gap_ok)

    decode_plan = staticmethod(decode_clips)  # a module-level function: workers unpickle it by name

    def finish_views(self, decoded: torch.Tensor, plan: ClipViews, device: torch.device) -> list[torch.Tensor]:
        return finish_clip_views(self._aug, decoded, plan, device)


class VideoContrastive(_VideoMethod):
    num_views = 4

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.kind = KINDS[m.name]
        self.clip_sampler = clip_sampler(m)
        self.backbone = build_video_backbone(m.backbone)
        d = self.backbone.out_dim
        self.head = nn.Sequential(nn.Linear(d, m.head_hidden), nn.ReLU(inplace=True), nn.Linear(m.head_hidden, m.head_dim))
        self.keys = MomentumQueue(m.momentum)
        self.key_backbone = self.keys.copy(self.backbone)
        self.key_head = self.keys.copy(self.head)
        self.bank = self.keys.bank(m.bank_size, m.head_dim)
        self.taus = list(m.taus)
        self.exclude_own = m.own_video_keys == "exclude"
        # x_v placement per video of the batch about to train: a bool table over video indices (True beyond it)
        self._gap_ok = torch.ones(0, dtype=torch.bool)

    def make_views(self, train_set, idx, generator, augs) -> list[torch.Tensor]:
        """anchor, x_f, x_s, x_v clips of videos `idx`: positions first, then four augmentations."""
        plan = self.clip_sampler.sample(train_set.frame_counts[idx], generator)
        clips = train_set.clips(idx, plan.frames)  # uint8 [B, 3 views, C, T, H, W]
        self._remember_gaps(idx, plan.gap_ok)
        aug = self._augment(train_set)
        return [aug(clips[:, v], generator) for v in (0, 0, 1, 2)]

    def clip_plan(self, train_set, idx, generator, augs) -> ClipViews | None:
        """What `make_views` draws, in its order; None for frames of the stored size (unknown before decode)."""
        if train_set.frame_size is None:
            return None
        sampled = self.clip_sampler.sample(train_set.frame_counts[idx], generator)
        return self._plan(train_set, idx, sampled.frames, (0, 0, 1, 2), generator, sampled.gap_ok)

    def finish_views(self, decoded: torch.Tensor, plan: ClipViews, device: torch.device) -> list[torch.Tensor]:
        # the step about to train: its x_v placements (make_views sets them as it draws)
        self._remember_gaps(plan.videos, plan.gap_ok)
        return super().finish_views(decoded, plan, device)

    def _remember_gaps(self, videos: torch.Tensor, gap_ok: torch.Tensor) -> None:
        """Set with the views (on the host, with the data): the step then looks its batch up without a read."""
        table = torch.ones(int(videos.max()) + 1 if len(videos) else 0, dtype=torch.bool)
        table[videos] = gap_ok.bool().cpu()
        self._gap_ok = table

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.head(self.backbone(x)), dim=1)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        anchor, xf, xs, xv = batch.views
        q = self.embed(anchor)
        with torch.no_grad():
            b = anchor.shape[0]
            k = nn.functional.normalize(self.key_head(self.key_backbone(torch.cat([xf, xs, xv]))), dim=1)
            kf, ks, kv = k[:b], k[b:2 * b], k[2 * b:]
        sim = video_similarities(q, kf, ks, kv, self.bank.features)
        table, videos = self._gap_ok, batch.indices  # host tensors (the engine's): looking up reads nothing back
        gap_ok = (torch.where(videos < len(table), table[videos.clamp(max=len(table) - 1)], True) if len(table)
                  else torch.ones(len(videos), dtype=torch.bool))
        # non-blocking copies: a blocking one from the host waits for the device's queue
        indices = batch.indices.to(sim.device, non_blocking=True)
        # bank "labels" are video indices: keys of the anchor's own video (earlier epochs) take no part
        own = self.bank.labels[None, :] == indices.to(self.bank.labels.device)[:, None] if self.exclude_own else None
        ranks = video_ranks(self.kind, gap_ok, self.bank.size, own).to(sim.device)
        loss = ranked_info_nce(sim, ranks, self.taus, form="in", positives="rank", rank_reduction="sum")
        self.keys.update()
        self.keys.stage(indices, keys=kf)  # bank "labels": video indices
        return {"loss": loss}

    def after_backward(self) -> None:
        self.keys.flush()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)


class VideoFinetune(_VideoMethod):
    """Pre-trained backbone + dropout + random linear layer, end-to-end cross-entropy on one random
    clip per video and epoch; `classify_clips` gives logits (the video evaluations average them)."""

    num_views = 1
    has_clip_classifier = True  # read by semcl.evals.protocols.video_accuracy

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        m = cfg.method
        self.clip_sampler = clip_sampler(m)
        self.backbone = build_video_backbone(m.backbone)
        self.drop = nn.Dropout(m.dropout)
        self.fc = nn.Linear(self.backbone.out_dim, info.num_classes)

    def load_dependencies(self, deps) -> None:
        """The base run's backbone weights (its head, key encoder and bank are dropped)."""
        (dep,) = deps
        state = {k.removeprefix("backbone."): v for k, v in dep.load_state().items() if k.startswith("backbone.")}
        self.backbone.load_state_dict(state)

    def _frames(self, train_set, idx, generator) -> torch.Tensor:
        """int64 [B, 1, T]: one clip per video at a uniform random start."""
        counts = train_set.frame_counts[idx]
        last = (counts - self.clip_sampler.span).clamp(min=0)
        starts = torch.minimum((torch.rand(len(idx), generator=generator, dtype=torch.float64)
                                * (last + 1)).long(), last)
        return self.clip_sampler.clip_frames(starts, counts)[:, None]

    def make_views(self, train_set, idx, generator, augs) -> list[torch.Tensor]:
        frames = self._frames(train_set, idx, generator)
        return [self._augment(train_set)(train_set.clips(idx, frames)[:, 0], generator)]

    def clip_plan(self, train_set, idx, generator, augs) -> ClipViews | None:
        if train_set.frame_size is None:
            return None
        return self._plan(train_set, idx, self._frames(train_set, idx, generator), (0,), generator)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits = self.fc(self.drop(self.backbone(batch.views[0])))
        return {"loss": nn.functional.cross_entropy(logits, batch.labels)}

    def classify_clips(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(self.backbone(x)))


class VideoFeatures(ClipMethod):
    """The base run's backbone, untrained further (no parameter trains): evaluations read `features`."""

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.clip_sampler = clip_sampler(cfg.method)
        self.backbone = build_video_backbone(cfg.method.backbone)
        self.backbone.requires_grad_(False)

    load_dependencies = VideoFinetune.load_dependencies

    def configure_optimizer(self, optim) -> None:
        return None
