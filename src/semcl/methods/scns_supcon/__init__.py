"""SCNS's supervised setting (docs/papers/scns.md §b `scns/sup-cifar10`, §d.3): supervised contrastive training whose
negatives come from a memory bank drawn by a sampler: `uniform` (other-class images, CRD's pool) or
`class` (SCNS-class: a class among the top-k word-similar ones, drawn ∝ similarity, then an image), or, as
`scns_supcon_instance`, SCNS-instance (the k most similar other-class images by the penultimate features of a
pretrained network -- the finished run its row names with `teacher:` -- from one pass before training), with
optional Latent Mixup (mixed anchor/negative pseudo-negatives, and a distance between the two views' mixed
representations). The loss is semcl.losses.scns_supcon;
every choice is an assumption (the paper's loss and settings are unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from semcl.errors import ConfigError
from semcl.methods.spec import MethodSpec, StandIn


@dataclass
class SCNSSupConMethod:
    name: str = "scns_supcon"
    negatives: str = "uniform"  # uniform | class
    num_negatives: int = 4096  # K drawn per image (assumption)
    temperature: float = 0.1  # SupCon's CIFAR temperature (assumption)
    bank_momentum: float = 0.5  # CRD's memory momentum: m <- normalize(0.5 m + 0.5 z)
    k: int = 10  # top-k classes (SCNS-class)
    weighting: str = "similarity"  # similarity | softmax
    softmax_t: float = 0.1
    latent_mixup: bool = False
    lm_lam_max: float = 1.0  # lambda ~ U(0, lm_lam_max)
    lm_num_mixed: int | None = None  # mixed negatives per anchor; None = all K
    # both (the paper's LM, as in the KD students: pseudo-negatives and a distance between the mixed representations,
    # here of the two views) | extra: the pseudo-negatives alone | distance: the distance term alone
    lm_mode: str = "both"
    lm_weight: float = 1.0  # weight of the distance term on the loss
    vectors: str = "glove"  # glove | vectors | sentence (semcl.data.semantics.word_vectors)
    vectors_path: str | None = None
    vectors_sha256: str | None = None  # required with vectors_path (its content in the run id)

    def __post_init__(self) -> None:
        if self.vectors_path is not None and self.vectors_sha256 is None:
            raise ValueError("'method.vectors_path' needs 'method.vectors_sha256' (sha256sum of the file)")
        if self.num_negatives < 1 or self.temperature <= 0 or not 0 <= self.bank_momentum < 1:
            raise ValueError("scns_supcon: num_negatives >= 1, temperature > 0 and 0 <= bank_momentum < 1")


@dataclass
class SCNSSupConInstanceMethod:
    """SCNS-instance in the supervised setting. The paper's "pretrained network" is unknown: here the run the
    row names with `teacher:` (a cross-entropy run of the same backbone, assumption), its backbone's pooled
    features of the un-augmented training images, one pass before training (docs/papers/scns.md §c.3)."""

    name: str = "scns_supcon_instance"
    num_negatives: int = 4096
    temperature: float = 0.1
    bank_momentum: float = 0.5
    k: int = 10  # other-class images per pool (docs/papers/scns.md §d.3: 10)
    weighting: str = "uniform"  # uniform within the pool (sheet) | similarity (clipped cosine)
    latent_mixup: bool = False
    lm_lam_max: float = 1.0
    lm_num_mixed: int | None = None
    # both (the paper's LM, as in the KD students: pseudo-negatives and a distance between the mixed representations,
    # here of the two views) | extra: the pseudo-negatives alone | distance: the distance term alone
    lm_mode: str = "both"
    lm_weight: float = 1.0  # weight of the distance term on the loss

    def __post_init__(self) -> None:
        if self.num_negatives < 1 or self.temperature <= 0 or not 0 <= self.bank_momentum < 1 or self.k < 1:
            raise ValueError("scns_supcon_instance: num_negatives, k >= 1, temperature > 0, 0 <= bank_momentum < 1")


def check_top_k_classes(method_cfg: SCNSSupConMethod, num_classes: int) -> None:
    """SCNS-class draws from the top-k of each class's C - 1 other classes (semcl.data.semantics.negatives)."""
    if method_cfg.negatives == "class" and not 1 <= method_cfg.k <= num_classes - 1:
        raise ConfigError(f"'method.k' = {method_cfg.k}: SCNS-class needs 1 <= k <= {num_classes - 1} "
                          f"(the other classes of each class)")


def check_instance_classes(method_cfg: SCNSSupConInstanceMethod, num_classes: int) -> None:
    """SCNS-instance pools hold other-class images: a dataset of one class has none."""
    if num_classes < 2:
        raise ConfigError(f"'method.name' = {method_cfg.name!r}: SCNS-instance needs at least 2 classes")


_LOSSES = ("semcl.losses.scns_supcon:bank_supcon_loss", "semcl.losses.latent_mixup:lm_distance_loss")
_LM_MODES = frozenset({"both", "extra", "distance"})
SPEC = MethodSpec("scns_supcon", SCNSSupConMethod, "semcl.methods.scns_supcon.method:SCNSSupCon", train_cost=2.0,
                  check_dataset=check_top_k_classes,
                  choices={"negatives": frozenset({"uniform", "class"}), "lm_mode": _LM_MODES,
                           "weighting": frozenset({"similarity", "softmax"}),
                           "vectors": frozenset({"glove", "vectors", "sentence"})},
                  summary="supervised contrastive loss over bank negatives drawn uniformly or by SCNS-class",
                  losses=_LOSSES, stand_in=StandIn(neighbours="k"))  # top-k classes or other-class images per pool

INSTANCE_SPEC = MethodSpec("scns_supcon_instance", SCNSSupConInstanceMethod,
                           "semcl.methods.scns_supcon.method:SCNSSupConInstance", train_cost=2.0, depends="teacher",
                           check_dataset=check_instance_classes,
                           choices={"weighting": frozenset({"uniform", "similarity"}), "lm_mode": _LM_MODES},
                           summary="supervised contrastive loss over bank negatives drawn by SCNS-instance (pools "
                                   "from a finished run's features)", losses=_LOSSES,
                           stand_in=StandIn(neighbours="k"))
