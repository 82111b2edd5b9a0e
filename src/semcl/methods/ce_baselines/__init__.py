"""RINCE's hierarchy-aware cross-entropy baselines: label smoothing within the superclass, two heads."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


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


LABEL_SMOOTHING_SUPERCLASS = MethodSpec(
    "label_smoothing_superclass", LabelSmoothingSuperclassMethod,
    "semcl.methods.ce_baselines.method:LabelSmoothingSuperclass", train_cost=1.0,
    summary="CE with label smoothing within the superclass",
    losses=("semcl.losses.hierarchical_ce:superclass_label_smoothing_loss",))
TWO_HEADS = MethodSpec("two_heads", TwoHeadsMethod, "semcl.methods.ce_baselines.method:TwoHeads", train_cost=1.0,
                       choices={"logit_norm": frozenset({"l2"})}, summary="CE with a fine and a superclass head",
                       losses=("semcl.losses.hierarchical_ce:two_heads_loss",))
