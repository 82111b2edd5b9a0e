"""RINCE's metric-learning baselines: triplet with rank margins, FastAP."""

from dataclasses import dataclass, field

from semcl.methods.spec import MethodSpec


@dataclass
class TripletMethod:
    """RINCE's "Triplet (rank margins)": batch-all triplet loss on the normalised SCL projection, margin m1
    when the negative shares the anchor's superclass, m2 when it is in another one (semcl.losses.metric)."""

    name: str = "triplet"
    margins: list[float] = field(default_factory=lambda: [0.5, 1.0])  # [m1, m2] (paper); assignment inferred


@dataclass
class FastAPMethod:
    """FastAP (Cakir et al., CVPR 2019) on the normalised SCL projection, fine-label relevance, batches of two
    superclasses (semcl.losses.metric, semcl.data.sampling)."""

    name: str = "fastap"
    num_bins: int = 5  # the official code's num_bins: bin width 4 / num_bins, num_bins + 1 bin centres on [0, 4]


TRIPLET = MethodSpec("triplet", TripletMethod, "semcl.methods.metric_learning.method:RankMarginTriplet",
                     summary="batch-all triplet loss with rank margins", losses=("semcl.losses.metric:rank_margin_triplet_loss",))
FASTAP = MethodSpec("fastap", FastAPMethod, "semcl.methods.metric_learning.method:FastAP",
                    summary="FastAP with two-superclass batches", losses=("semcl.losses.metric:fastap_loss",))
