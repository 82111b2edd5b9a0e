"""Contrastive losses: ranked InfoNCE (InfoNCE / SCL / RINCE), parametric contrastive (PaCo / GPaCo),
SupCon, and RIDE's LDAM + diversity loss; hierarchy-aware cross-entropies (RINCE's CE baselines); the
rank-margin triplet loss and FastAP (RINCE's metric-learning baselines)."""

from semcl.losses.hierarchical_ce import superclass_label_smoothing_loss, superclass_smoothed_targets, two_heads_loss
from semcl.losses.hierarchical_triplet import hierarchical_triplet_loss
from semcl.losses.metric import fastap_loss, fastap_per_query, rank_margin_triplet_loss
from semcl.losses.paco import paco_loss, supcon_loss
from semcl.losses.ranked import key_first_rank_only, ranked_info_nce, tau_from_similarity, taus_for_levels
from semcl.losses.ride import ldam_loss, ride_loss

__all__ = ["fastap_loss", "fastap_per_query", "hierarchical_triplet_loss", "key_first_rank_only", "ldam_loss",
           "paco_loss", "ranked_info_nce", "rank_margin_triplet_loss", "ride_loss",
           "superclass_label_smoothing_loss", "superclass_smoothed_targets", "supcon_loss", "tau_from_similarity",
           "taus_for_levels", "two_heads_loss"]

