"""Contrastive losses: ranked InfoNCE (InfoNCE / SCL / RINCE), parametric contrastive (PaCo / GPaCo),
SupCon, and RIDE's LDAM + diversity loss."""

from semcl.losses.paco import paco_loss, supcon_loss
from semcl.losses.ranked import key_first_rank_only, ranked_info_nce, tau_from_similarity, taus_for_levels
from semcl.losses.ride import ldam_loss, ride_loss

__all__ = ["LOSSES", "key_first_rank_only", "ldam_loss", "paco_loss", "ranked_info_nce", "ride_loss", "supcon_loss",
           "tau_from_similarity", "taus_for_levels"]

LOSSES = {"ranked_info_nce": ranked_info_nce, "paco": paco_loss, "ride": ride_loss, "supcon": supcon_loss}
