"""RINCE video (Tab. 4): self-supervised 3D-ResNet pre-training with temporal ranks, and fine-tuning.

Pre-training rows (docs/papers/rince.md §c.6, §d.3; no official code, every open choice named here):
`video_infonce`, `video_hp`, `video_hn`, `video_rince` differ only in the ranks of the anchor's
own clips x_f / x_s / x_v (semcl.losses.video_ranks) and their temperatures. Backbone Hara et al.'s
3D-ResNet-18 (semcl.models.hara_r3d; torchvision's r3d_18 is the variant) pooled 512-d + MLP head
(512 hidden, ReLU; output 128-d: an assumption, the paper gives none);
MoCo key encoder (momentum 0.99) and a bank of 65,536 keys; Adam lr 1e-3, wd 1e-5 (optim.* in the
table). Second stage `video_finetune` (init_from the pre-training row): the pre-trained backbone,
dropout 0.9 and a random linear layer, end-to-end cross-entropy (Adam lr 1e-4, wd 1e-5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from semcl.methods.spec import MethodSpec, Networks

# hara_r3d18: Hara et al.'s 3D-ResNet-18 (the paper's backbone; shortcut A, _b: shortcut B);
# r3d_18: torchvision's (no max-pool, 3x7x7 stem: a variant); r3d_small: mini / smoke
BACKBONES = frozenset({"hara_r3d18", "hara_r3d18_b", "r3d_18", "r3d_small"})
POSITIVES = frozenset({"nearby", "shuffled"})
OWN_VIDEO_KEYS = frozenset({"exclude", "negative"})


@dataclass
class _Clips:
    # clips: 16 frames at temporal stride 3, x_v >= 48 frames from x_f and x_s (paper prose, §d.3)
    num_frames: int = 16
    stride: int = 3
    min_gap: int = 48
    positive: str = "nearby"  # what x_s is (assumption, semcl.data.video.sampler): nearby | shuffled
    max_shift: int = 24  # x_s start = anchor start ± up to this many frames (assumption)
    backbone: str = "hara_r3d18"  # 3D-ResNet18 (Hara et al. 2018, semcl.models.hara_r3d); see BACKBONES

    def __post_init__(self) -> None:
        if min(self.num_frames, self.stride) < 1 or min(self.min_gap, self.max_shift) < 0:
            raise ValueError("method.num_frames and stride must be >= 1, min_gap and max_shift >= 0")


@dataclass
class _Pretrain(_Clips):
    bank_size: int = 65_536  # §d.3
    momentum: float = 0.99  # §d.3
    head_hidden: int = 512  # §d.3: MLP with 512 hidden units
    head_dim: int = 128  # output dimension unknown (§d.3): 128 as the image experiments (assumption)
    taus: list[float] = field(default_factory=lambda: [0.1])  # baselines τ = 0.1 (§d.3)
    # bank keys of the anchor's own video (enqueued in earlier epochs): "exclude" = take no part (default;
    # with UCF101 the bank holds ~6 of them per video), "negative" = counted as negatives (the variant)
    own_video_keys: str = "exclude"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.taus or any(t <= 0 for t in self.taus):
            raise ValueError("method.taus must be positive temperatures")


@dataclass
class VideoInfoNCE(_Pretrain):
    name: str = "video_infonce"


@dataclass
class VideoHP(_Pretrain):
    name: str = "video_hp"


@dataclass
class VideoHN(_Pretrain):
    name: str = "video_hn"


@dataclass
class VideoRince(_Pretrain):
    name: str = "video_rince"
    taus: list[float] = field(default_factory=lambda: [0.1, 0.15, 0.2])  # τ1, τ2, τ3 (§d.3)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.taus) != 3:
            raise ValueError(f"method.taus: RINCE video has three ranks (x_f, x_s, x_v), got {len(self.taus)}")


@dataclass
class VideoFinetune(_Clips):
    name: str = "video_finetune"
    dropout: float = 0.9  # §d.3
    # training clips: one 16-frame clip at a uniform random start per video and epoch (assumption)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"method.dropout must lie in [0, 1), got {self.dropout}")


@dataclass
class VideoFeatures(_Clips):
    """A zero-epoch second stage that only exposes the base run's backbone to evaluations (retrieval
    of the pre-trained features on another video set, e.g. HMDB51)."""

    name: str = "video_features"


_CLS = "semcl.methods.video_rank.method"
_CLIP_CHOICES = {"backbone": BACKBONES, "positive": POSITIVES}
_CHOICES = {**_CLIP_CHOICES, "own_video_keys": OWN_VIDEO_KEYS}


def video_networks(m, model) -> Networks:
    """A video row trains `method.backbone` on clips of `method.num_frames` frames."""
    return Networks(m.backbone, "video", frames=m.num_frames)


_CONTRAST = {"losses": ("semcl.losses.ranked:ranked_info_nce",), "builder": "semcl.models.video:build_video_backbone",
             "networks": video_networks}
# four clips per video (anchor, x_f, x_s, x_v), one with gradients: cost per video-epoch ≈ 1 + 3/3
VIDEO_SPECS = (
    MethodSpec("video_infonce", VideoInfoNCE, f"{_CLS}:VideoContrastive", train_cost=5 / 3, choices=_CHOICES,
               summary="MoCo-style InfoNCE on clips: x_f the only positive", **_CONTRAST),
    MethodSpec("video_hp", VideoHP, f"{_CLS}:VideoContrastive", train_cost=2.0, choices=_CHOICES,
               summary="InfoNCE with x_s and x_v as extra positives (hard positives)", **_CONTRAST),
    MethodSpec("video_hn", VideoHN, f"{_CLS}:VideoContrastive", train_cost=2.0, choices=_CHOICES,
               summary="InfoNCE with x_s and x_v as negatives (hard negatives)", **_CONTRAST),
    MethodSpec("video_rince", VideoRince, f"{_CLS}:VideoContrastive", train_cost=2.0, choices=_CHOICES,
               summary="RINCE on clips: ranks x_f < x_s < x_v, τ 0.1 / 0.15 / 0.2", **_CONTRAST),
    MethodSpec("video_finetune", VideoFinetune, f"{_CLS}:VideoFinetune", depends="init_from", choices=_CLIP_CHOICES,
               summary="end-to-end fine-tuning of a pre-trained video backbone (dropout 0.9 + linear)",
               losses=("torch.nn.functional:cross_entropy",), builder=_CONTRAST["builder"], networks=video_networks),
    MethodSpec("video_features", VideoFeatures, f"{_CLS}:VideoFeatures", train_cost=0.0, depends="init_from",
               choices=_CLIP_CHOICES, summary="a pre-trained video backbone read as is (retrieval on another set)",
               builder=_CONTRAST["builder"], networks=video_networks),
)
