"""PaCo, GPaCo, SupCon-with-a-queue and GPaCo's multi-task baseline: contrast samples and class centres."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

PRIOR = frozenset({"train", "uniform", "none"})
# GPaCo / multi-task: how the two views pass the one encoder. "separate": two forwards, so BatchNorm
# normalises each view with its own batch statistics (official GPaCo builder: encoder_q(im_q), then
# encoder_q(im_k)); "concat": one forward of both views stacked (BN statistics mix the views).
VIEW_FORWARD = frozenset({"separate", "concat"})
# the queue before its first writes. "official": as every official builder, keys
# normalize(randn(K, d), dim=0) -- normalised over the K slots, so each key's norm is about sqrt(d / K),
# 0.125 at d 128, K 8192 -- and labels randint(0, num_classes, (K,)); "random": the same labels on
# unit-norm keys (the suite's earlier default); "empty": unit-norm keys, label -1, never a positive
QUEUE_INIT = frozenset({"official", "random", "empty"})


@dataclass
class PacoMethod:
    """PaCo (ICCV 2021): momentum key encoder, queue of keys and labels, class centers."""

    name: str = "paco"
    alpha: float = 0.05  # weight of sample positives (the own class center weighs 1)
    tau: float = 0.2
    queue_size: int = 8192
    momentum: float = 0.999
    prior: str = "train"  # balanced-softmax offset on center logits: train | uniform | none
    centers_over_tau: bool = False  # official code leaves center logits unscaled (docs/papers/paco.md §g.9)
    label_smoothing: float = 0.0  # on the center target (GPaCo full-ImageNet / ViT runs use 0.1)
    queue_init: str = "official"  # the official builders' initial queue (QUEUE_INIT)


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
    view_forward: str = "separate"  # official: one encoder call per view (BN per view); "concat" variant
    queue_init: str = "official"


@dataclass
class SupConMethod:
    """SupCon in the MoCo framework (GPaCo Eq. 3) with a detached linear classifier."""

    name: str = "supcon"
    tau: float = 0.2
    queue_size: int = 8192
    momentum: float = 0.999
    queue_init: str = "official"


@dataclass
class MultiTaskMethod:
    """GPaCo's multi-task baseline: CE + weight * SupCon on GPaCo's one-encoder, two-view setup."""

    name: str = "multitask"
    weight: float = 0.5  # SupCon weight (0.5 in every official multi-task script)
    tau: float = 0.07
    queue_size: int = 1024
    prior: str = "none"  # train: balanced-softmax CE (the LT form); none: plain CE (CIFAR form)
    # None = unweighted: what every official script trains (the LT scripts' effective-number weights are all
    # exactly 1, a [1, C]-shape slip in cal_weight_for_classes, PCL GPaCo/LT/losses.py:95-103 @fe56535);
    # effective_number: the intended mean(E) / E_y, E_j = (1 - 0.999^n_j) / (1 - 0.999) (a variant)
    supcon_class_weights: str | None = None
    view_forward: str = "separate"  # as GPaCo: one encoder call per view (official multi-task builder)
    queue_init: str = "official"


_M = "semcl.methods.paco.method"
_PACO, _SUPCON = "semcl.losses.paco:paco_loss", "semcl.losses.paco:supcon_loss"
PACO = MethodSpec("paco", PacoMethod, f"{_M}:PaCo", choices={"prior": PRIOR, "queue_init": QUEUE_INIT},
                  summary="parametric contrastive learning with a momentum encoder", losses=(_PACO,))
# GPaCo and the multi-task baseline train both views through the one encoder (two fwd+bwd per image); PaCo and
# SupCon train the query view and only run the momentum key encoder forward (1 + 1/3, the default)
GPACO = MethodSpec("gpaco", GPacoMethod, f"{_M}:GPaCo", train_cost=2.0,
                   choices={"prior": PRIOR, "view_forward": VIEW_FORWARD, "queue_init": QUEUE_INIT},
                   summary="generalized PaCo: one encoder, both views anchors", losses=(_PACO,),
                   head_layers=3)  # gpaco_head: 3 linear layers (method.py)
SUPCON = MethodSpec("supcon", SupConMethod, f"{_M}:SupConQueue", choices={"queue_init": QUEUE_INIT},
                    summary="SupCon with a momentum encoder and queue", losses=(_SUPCON, "torch.nn.functional:cross_entropy"))
MULTITASK = MethodSpec("multitask", MultiTaskMethod, f"{_M}:MultiTask", train_cost=2.0,
                       choices={"prior": PRIOR, "supcon_class_weights": frozenset({"effective_number"}),
                                "view_forward": VIEW_FORWARD, "queue_init": QUEUE_INIT},
                       summary="CE + weight x SupCon on one encoder", losses=("torch.nn.functional:cross_entropy", _SUPCON),
                       head_layers=3)  # gpaco_head, as GPaCo
