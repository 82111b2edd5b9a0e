"""PaCo, GPaCo, SupCon-with-a-queue and GPaCo's multi-task baseline: contrast samples and class centres."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

PRIOR = frozenset({"train", "uniform", "none"})


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


_M = "semcl.methods.paco.method"
PACO = MethodSpec("paco", PacoMethod, f"{_M}:PaCo", choices={"prior": PRIOR},
                  summary="parametric contrastive learning with a momentum encoder")
GPACO = MethodSpec("gpaco", GPacoMethod, f"{_M}:GPaCo", choices={"prior": PRIOR},
                   summary="generalized PaCo: one encoder, both views anchors")
SUPCON = MethodSpec("supcon", SupConMethod, f"{_M}:SupConQueue", summary="SupCon with a momentum encoder and queue")
MULTITASK = MethodSpec("multitask", MultiTaskMethod, f"{_M}:MultiTask",
                       choices={"prior": PRIOR, "supcon_class_weights": frozenset({"effective_number"})},
                       summary="CE + weight x SupCon on one encoder")
