"""RINCE's "Hierarchical triplet" baseline (Ge et al., ECCV 2018) with the ground-truth superclasses as the tree."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec, StandIn


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


def small_structured_batch(cfg, batch: int) -> dict:
    """The method fields that give the preflight's small `batch` the row's structure (l' + l'c + t images): one
    anchor class, two images of its nearest class (a positive pair, so the batch has triplets), the rest random;
    the same sampler, statistics and loss as at l' 30, c 10, t 182 (a 512 batch: ~140 s). {} where the row's
    fields do not add up to its batch (the check reports that) or the batch is too small for the structure."""
    m = cfg.method
    if m.l_prime + m.l_prime * m.c + m.t != cfg.optim.batch_size or batch < 3 or batch >= cfg.optim.batch_size:
        return {}
    return {"l_prime": 1, "c": 2, "t": batch - 3}


HIERARCHICAL_TRIPLET = MethodSpec("hierarchical_triplet", HierarchicalTripletMethod,
                                  "semcl.methods.hierarchical_triplet.method:HierarchicalTriplet",
                                  summary="hierarchical triplet loss with anchor-neighbour batches",
                                  losses=("semcl.losses.hierarchical_triplet:hierarchical_triplet_loss",),
                                  stand_in=StandIn(batch=small_structured_batch))
