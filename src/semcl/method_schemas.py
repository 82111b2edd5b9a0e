"""Method parameter schemas: one dataclass per method, chosen by `method.name`, plus the methods
the registry may name before their training code exists, and RINCE's named variants.

Part of the one strict config schema (semcl.config validates a run's `method` section against
the dataclass named here). New fields default to None or to the value that reproduces the old
behaviour, so existing run ids stay put.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class CEMethod:
    name: str = "ce"


@dataclass
class CESAMethod:
    """Cross-entropy with the contrastive methods' strong augmentation (RINCE's "CE s.a.")."""

    name: str = "ce_sa"


@dataclass
class LabelSmoothingSuperclassMethod:
    """RINCE's "label smoothing within superclass": CE whose target moves mass alpha from the true class
    to its superclass siblings, spread uniformly (a class without siblings keeps a one-hot target)."""

    name: str = "label_smoothing_superclass"
    alpha: float = 0.1  # the paper tried 3 values (grid unknown); 0.1 is the official code's commented default


@dataclass
class TwoHeadsMethod:
    """RINCE's "two heads": backbone + fine head + superclass head, L = (1 - weight) CE_fine + weight CE_superclass."""

    name: str = "two_heads"
    weight: float = 0.1  # lambda: the one known value of the paper's grid (Tab. 10; commented code default)
    # None: plain CE on each head's logits (paper prose); l2: each head's logits L2-normalised before the CE
    # (official SupCEResNet(two_heads=True): F.normalize(fc(feat)), logits on the unit sphere)
    logit_norm: str | None = None


@dataclass
class SCLMethod:
    name: str = "scl"
    form: str = "in"  # in | out
    tau: float = 0.1
    bank_size: int = 4096
    momentum: float = 0.99


@dataclass
class SCLTwoHeadsMethod:
    """RINCE's "SCL two heads" baseline: SCL with a fine and a superclass projection head on one
    backbone, L = (1 - weight) * L_fine + weight * L_super; the rest as the SCL rows."""

    name: str = "scl_two_heads"
    form: str = "in"  # in | out, both heads; the paper's form is unknown (see semcl.methods.scl_two_heads)
    tau: float = 0.1
    bank_size: int = 4096
    momentum: float = 0.99
    weight: float = 0.1  # lambda, weight of the superclass loss; the paper's grid is unknown (assumed)


@dataclass
class RinceMethod:
    name: str = "rince"
    form: str = "in"  # in | out | out_in
    taus: list[float] = field(default_factory=lambda: [0.1, 0.225])
    ranks: str = "superclass"  # how ranks are built: superclass
    sibling_sim: float = 0.75
    bank_size: int = 4096
    momentum: float = 0.99
    variant: str = "paper"  # paper | code | readme_literal; fills the knobs below when unset
    positives: str | None = None  # rank | cumulative
    rank_reduction: str | None = None  # sum | mean
    key_first_rank_only: bool | None = None


@dataclass
class TripletMethod:
    """RINCE's "Triplet (rank margins)": batch-all triplet loss on the normalised SCL projection, margin m1
    when the negative shares the anchor's superclass, m2 when it is in another one (semcl.losses.metric)."""

    name: str = "triplet"
    margins: list[float] = field(default_factory=lambda: [0.5, 1.0])  # [m1, m2] (paper); assignment inferred


@dataclass
class FastAPMethod:
    """FastAP (Cakir et al., CVPR 2019) on the normalised SCL projection, fine-label relevance, batches of two
    superclasses (semcl.losses.metric, semcl.engine.sampling)."""

    name: str = "fastap"
    num_bins: int = 5  # the official code's num_bins: bin width 4 / num_bins, num_bins + 1 bin centres on [0, 4]


@dataclass
class HierarchicalTripletMethod:
    """RINCE's "Hierarchical triplet" (Ge et al., ECCV 2018) with the ground-truth superclasses as the tree:
    violate margin beta + d_H(y_a, y_n) - s_(y_a) from class statistics refreshed per epoch, anchor-neighbour
    batches of l_prime + l_prime * c + t images (semcl.losses.hierarchical_triplet, semcl.engine.sampling)."""

    name: str = "hierarchical_triplet"
    l_prime: int = 30  # anchor classes per batch, one image each (paper: 30)
    c: int = 10  # images of each anchor class's nearest class (paper: 10)
    t: int = 182  # random images (paper: 182); l_prime + l_prime * c + t must equal optim.batch_size
    beta: float = 0.1  # Ge et al.'s constant in the violate margin (0.1, as recalled)
    squared: bool = False  # False: Euclidean distances in the hinge (Ge et al.); True: squared, the units of d_H, s


@dataclass
class PacoMethod:
    """PaCo (ICCV 2021): momentum key encoder, queue of keys and labels, class centers."""

    name: str = "paco"
    alpha: float = 0.05  # weight of sample positives (the own class center weighs 1)
    tau: float = 0.2
    queue_size: int = 8192
    momentum: float = 0.999
    prior: str = "train"  # balanced-softmax offset on center logits: train | uniform | none
    centers_over_tau: bool = False  # official code leaves center logits unscaled (paco.md g.9)
    label_smoothing: float = 0.0  # on the center target (GPaCo full-ImageNet / ViT runs use 0.1)


@dataclass
class GPacoMethod:
    """GPaCo (TPAMI): PaCo without the momentum encoder; both views are anchors."""

    name: str = "gpaco"
    alpha: float = 0.05
    tau: float = 0.2
    queue_size: int = 8192
    prior: str = "train"
    centers_over_tau: bool = False
    label_smoothing: float = 0.0


@dataclass
class SupConMethod:
    """SupCon in the MoCo framework (GPaCo Eq. 3) with a detached linear classifier."""

    name: str = "supcon"
    tau: float = 0.2
    queue_size: int = 8192
    momentum: float = 0.999


@dataclass
class MultiTaskMethod:
    """GPaCo's multi-task baseline: CE + weight * SupCon on GPaCo's one-encoder, two-view setup."""

    name: str = "multitask"
    weight: float = 0.5  # SupCon weight (0.5 in every official multi-task script)
    tau: float = 0.07
    queue_size: int = 1024
    prior: str = "none"  # train: balanced-softmax CE (the LT form); none: plain CE (CIFAR form)
    # LT scripts (multitask_lt.py): each anchor's SupCon term x its class's effective-number weight
    # mean(E) / E_y with E_j = (1 - 0.999^n_j) / (1 - 0.999); None = unweighted (CIFAR form)
    supcon_class_weights: str | None = None


@dataclass
class BalancedSoftmaxMethod:
    """Cross-entropy on logits + log(class prior) (Ren et al. 2020); evaluated on raw logits."""

    name: str = "balanced_softmax"


@dataclass
class DecoupleCRTMethod:
    """Decouple cRT (Kang et al. 2020): a fresh linear classifier re-trained on the base run's frozen backbone."""

    name: str = "decouple_crt"
    sampling: str = "class_balanced"  # class_balanced | instance
    needs_base: ClassVar[bool] = True


@dataclass
class DecoupleTauNormMethod:
    """Decouple tau-normalisation: the base classifier's rows divided by ||w_j||^tau, no bias, no training.

    Kang et al. pick tau on a validation set (their tau_norm.py sweeps 0..2): `tau_select: val` does
    the same on the dataset's val split (top-1 over `tau_grid`, default 0.0, 0.1, ..., 2.0); without
    it the fixed `tau` is used.
    """

    name: str = "decouple_tau_norm"
    tau: float = 1.0
    tau_select: str | None = None  # val: choose tau on the val split (ImageNet-LT / Places-LT val files)
    tau_grid: list[float] | None = None
    needs_base: ClassVar[bool] = True


@dataclass
class DecoupleLWSMethod:
    """Decouple LWS: one learned scale per class on the base run's frozen backbone and classifier."""

    name: str = "decouple_lws"
    sampling: str = "class_balanced"  # class_balanced | instance
    needs_base: ClassVar[bool] = True


@dataclass
class EnsembleMethod:
    """Logit-sum ensemble of the row's `ensemble` member runs (official evaluation: sum of logits);
    trains nothing, reads the members' saved test logits."""

    name: str = "ensemble"


@dataclass
class RideMethod:
    """RIDE (Wang et al., ICLR 2021): shared early stages, experts with their own last two stages and
    cosine classifiers, LDAM-DRW per expert + a diversity term; no router, no distillation (GPaCo Table II).
    Defaults: the official ImageNet-LT configs (configs/config_imagenet_lt_resnet50_ride.json)."""

    name: str = "ride"
    num_experts: int = 3
    expert_width: float = 0.75  # experts' stage widths x 0.75 (official reduce_dimension: 192/256, 384/512)
    max_margin: float = 0.5  # LDAM: largest margin (rarest class)
    scale: float = 30.0  # logits = scale * cos(feature, class weight)
    drw_epoch: int | None = 80  # 0-based epoch from which DRW applies (official: last 20 of 100); None: never
    drw_beta: float = 0.9999  # effective-number class weights under DRW
    diversity_weight: float = -0.2  # lambda, added as is (negative: experts pushed away from the ensemble)
    diversity_temperature: float = 1.0
    diversity_reweight: float = 0.02  # per-class diversity temperatures under DRW (official reweight_factor)


METHOD_SCHEMAS: dict[str, type] = {
    "ensemble": EnsembleMethod,
    "ce": CEMethod,
    "ce_sa": CESAMethod,
    "label_smoothing_superclass": LabelSmoothingSuperclassMethod,
    "two_heads": TwoHeadsMethod,
    "scl": SCLMethod,
    "scl_two_heads": SCLTwoHeadsMethod,
    "rince": RinceMethod,
    "triplet": TripletMethod,
    "fastap": FastAPMethod,
    "hierarchical_triplet": HierarchicalTripletMethod,
    "paco": PacoMethod,
    "gpaco": GPacoMethod,
    "supcon": SupConMethod,
    "balanced_softmax": BalancedSoftmaxMethod,
    "multitask": MultiTaskMethod,
    "ride": RideMethod,
    "decouple_crt": DecoupleCRTMethod,
    "decouple_tau_norm": DecoupleTauNormMethod,
    "decouple_lws": DecoupleLWSMethod,
}

# Methods the registry may name whose training code is not built yet: rows using them are
# listed as "not implemented" and never planned.
PLANNED_METHODS: dict[str, str] = {
    "mae_finetune": "MAE ViT fine-tuning with cross-entropy (GPaCo robustness baseline)",
    "gpaco_vit": "GPaCo fine-tuning of MAE ViTs",
    "multitask_vit": "CE + 0.5 * SupCon fine-tuning of MAE ViTs",
    "gpaco_seg": "GPaCo as an auxiliary segmentation loss (mmseg models)",
    "seg_baseline": "segmentation baseline without GPaCo",
}

# Named RINCE variants (paper default; official-code behaviours as variants).
RINCE_VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {"positives": "rank", "rank_reduction": "sum", "key_first_rank_only": False},
    # official CIFAR branch: cumulative rank-2 positives, mean over ranks, own key only in rank 1
    "code": {"positives": "cumulative", "rank_reduction": "mean", "key_first_rank_only": True},
}
