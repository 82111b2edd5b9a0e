"""Contrastive losses: ranked InfoNCE (InfoNCE / SCL / RINCE) and parametric contrastive (PaCo / GPaCo)."""

from semcl.losses.paco import paco_loss
from semcl.losses.ranked import key_first_rank_only, ranked_info_nce, tau_from_similarity, taus_for_levels

__all__ = ["LOSSES", "key_first_rank_only", "paco_loss", "ranked_info_nce", "tau_from_similarity", "taus_for_levels"]

LOSSES = {"ranked_info_nce": ranked_info_nce, "paco": paco_loss}
