"""RINCE's "SCL two heads" baseline: SCL with a fine and a superclass projection head on one backbone."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class SCLTwoHeadsMethod:
    """RINCE's "SCL two heads" baseline: SCL with a fine and a superclass projection head on one
    backbone, L = (1 - weight) * L_fine + weight * L_super; the rest as the SCL rows."""

    name: str = "scl_two_heads"
    form: str = "in"  # in | out, both heads; the paper's form is unknown (see the method module)
    tau: float = 0.1
    bank_size: int = 4096
    momentum: float = 0.99
    weight: float = 0.1  # lambda, weight of the superclass loss; the paper's grid is unknown (assumed)

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"'method.weight' (lambda) must lie in [0, 1], got {self.weight}")


SCL_TWO_HEADS = MethodSpec("scl_two_heads", SCLTwoHeadsMethod, "semcl.methods.scl_two_heads.method:SCLTwoHeads",
                           choices={"form": frozenset({"in", "out"})}, summary="SCL with fine and superclass heads",
                           losses=("semcl.losses.ranked:ranked_info_nce",))
