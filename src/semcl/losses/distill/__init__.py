"""Knowledge-distillation losses of RepDistiller's method set (the SCNS KD baselines).

Every entry of DISTILL_LOSSES is a pure function of student / teacher tensors; the trainable pieces
(FitNet regressor / AB connector, VID heads, FT paraphraser and translator, CRD embeddings and memory
banks) are the modules listed in DISTILL_MODULES. Loss weights: weights.REPDISTILLER_WEIGHTS.
Semantics follow RepDistiller (https://github.com/HobbitLong/RepDistiller, Copyright 2020 Yonglong Tian,
BSD 2-Clause), reimplemented from the papers' formulas; where paper and code differ, see each ``variant``.
"""

from semcl.losses.distill.crd import (
    ContrastMemory,
    CRDLoss,
    Embed,
    LinearEmbed,
    infonce_loss,
    nce_loss,
    normalised,
    sample_uniform_negatives,
)
from semcl.losses.distill.feature_maps import (
    ConvRegressor,
    ab_loss,
    at_loss,
    attention_map,
    fsp_loss,
    fsp_matrix,
    hint_loss,
    nst_loss,
    pool_to_match,
)
from semcl.losses.distill.learned import Paraphraser, Translator, VIDHead, ft_loss, ft_reconstruction_loss, vid_loss
from semcl.losses.distill.logits import kd_loss
from semcl.losses.distill.relational import cc_kernel, cc_loss, pkt_loss, rkd_loss, sp_loss
from semcl.losses.distill.weights import HINT_LAYER, INIT_EPOCHS, REPDISTILLER_WEIGHTS, DistillWeights

__all__ = ["DISTILL_LOSSES", "DISTILL_MODULES", "HINT_LAYER", "INIT_EPOCHS", "REPDISTILLER_WEIGHTS", "CRDLoss",
           "ContrastMemory", "ConvRegressor", "DistillWeights", "Embed", "LinearEmbed", "Paraphraser", "Translator", "VIDHead",
           "ab_loss", "at_loss", "attention_map", "cc_kernel", "cc_loss", "fsp_loss", "fsp_matrix", "ft_loss",
           "ft_reconstruction_loss", "hint_loss", "infonce_loss", "kd_loss", "nce_loss", "normalised", "nst_loss", "pkt_loss",
           "pool_to_match", "rkd_loss", "sample_uniform_negatives", "sp_loss", "vid_loss"]

DISTILL_LOSSES = {"kd": kd_loss, "fitnet": hint_loss, "at": at_loss, "sp": sp_loss, "cc": cc_loss,
                  "vid": vid_loss, "rkd": rkd_loss, "pkt": pkt_loss, "ab": ab_loss, "ft": ft_loss,
                  "fsp": fsp_loss, "nst": nst_loss, "crd": nce_loss, "crd_infonce": infonce_loss}

DISTILL_MODULES = {"fitnet": ConvRegressor, "ab": ConvRegressor, "vid": VIDHead,
                   "ft": (Paraphraser, Translator), "cc": (LinearEmbed, Embed), "crd": CRDLoss}
