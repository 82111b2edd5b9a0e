"""Contrastive losses: ranked InfoNCE (InfoNCE / SCL / RINCE) and parametric contrastive (PaCo)."""

from semcl.losses.ranked_info_nce import key_first_rank_only, ranked_info_nce, tau_from_similarity, taus_for_levels

__all__ = ["LOSSES", "key_first_rank_only", "ranked_info_nce", "tau_from_similarity", "taus_for_levels"]

LOSSES = {"ranked_info_nce": ranked_info_nce}
