"""RINCE's "Hierarchical triplet" baseline (Ge et al., ECCV 2018) with the ground-truth superclasses as the tree."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class HierarchicalTripletMethod:
    """RINCE's "Hierarchical triplet" (Ge et al., ECCV 2018) with the ground-truth superclasses as the tree:
    violate margin beta + d_H(y_a, y_n) - s_(y_a) from class statistics refreshed per epoch, anchor-neighbour
    batches of l_prime + l_prime * c + t images (semcl.losses.hierarchical_triplet, semcl.data.sampling)."""

    name: str = "hierarchical_triplet"
    l_prime: int = 30  # anchor classes per batch, one image each (paper: 30)
    c: int = 10  # images of each anchor class's nearest class (paper: 10)
    t: int = 182  # random images (paper: 182); l_prime + l_prime * c + t must equal optim.batch_size
    beta: float = 0.1  # Ge et al.'s constant in the violate margin (0.1, as recalled)
    squared: bool = False  # False: Euclidean distances in the hinge (Ge et al.); True: squared, the units of d_H, s


HIERARCHICAL_TRIPLET = MethodSpec("hierarchical_triplet", HierarchicalTripletMethod,
                                  "semcl.methods.hierarchical_triplet.method:HierarchicalTriplet",
                                  summary="hierarchical triplet loss with anchor-neighbour batches",
                                  losses=("semcl.losses.hierarchical_triplet:hierarchical_triplet_loss",))
