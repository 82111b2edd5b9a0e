"""SCL and RINCE (ranked InfoNCE) with a momentum key encoder and a memory bank of keys and labels."""

from dataclasses import dataclass, field
from typing import Any

from semcl.methods.spec import MethodSpec


@dataclass
class SCLMethod:
    name: str = "scl"
    form: str = "in"  # in | out
    tau: float = 0.1
    bank_size: int = 4096
    momentum: float = 0.99


# Named RINCE variants (paper default; official-code behaviours as variants): each fills the knobs
# of RinceMethod left unset.
RINCE_VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {"positives": "rank", "rank_reduction": "sum", "key_first_rank_only": False},
    # official CIFAR branch: cumulative rank-2 positives, mean over ranks, own key only in rank 1
    "code": {"positives": "cumulative", "rank_reduction": "mean", "key_first_rank_only": True},
}


@dataclass
class RinceMethod:
    name: str = "rince"
    form: str = "in"  # in | out | out_in
    taus: list[float] = field(default_factory=lambda: [0.1, 0.225])
    ranks: str = "superclass"  # how ranks are built: superclass
    sibling_sim: float = 0.75
    bank_size: int = 4096
    momentum: float = 0.99
    variant: str = "paper"  # a key of RINCE_VARIANTS; fills the knobs below when unset
    positives: str | None = None  # rank | cumulative
    rank_reduction: str | None = None  # sum | mean
    key_first_rank_only: bool | None = None

    def __post_init__(self) -> None:
        for knob, value in RINCE_VARIANTS[self.variant].items():
            if getattr(self, knob) is None:
                setattr(self, knob, value)
        if self.form == "out_in" and len(self.taus) < 2:
            raise ValueError("'method.form' = 'out_in' needs at least two temperatures in 'method.taus'")


SCL = MethodSpec("scl", SCLMethod, "semcl.methods.ranked_contrastive.method:RankedContrastive",
                 choices={"form": frozenset({"in", "out"})}, summary="supervised contrastive, one rank")
RINCE = MethodSpec("rince", RinceMethod, "semcl.methods.ranked_contrastive.method:RankedContrastive",
                   choices={"form": frozenset({"in", "out", "out_in"}), "variant": frozenset(RINCE_VARIANTS),
                            "ranks": frozenset({"superclass"}), "positives": frozenset({"rank", "cumulative"}),
                            "rank_reduction": frozenset({"sum", "mean"})},
                   summary="ranked InfoNCE, one term per rank with rising temperatures")
