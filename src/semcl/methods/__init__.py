"""The method registry: config name -> class. Kept in step with semcl.config.METHOD_SCHEMAS."""

from semcl.methods.balanced_softmax import BalancedSoftmax
from semcl.methods.base import DataInfo, Method
from semcl.methods.ce import CrossEntropy
from semcl.methods.ce_baselines import LabelSmoothingSuperclass, TwoHeads
from semcl.methods.decouple import DecoupleCRT, DecoupleLWS, DecoupleTauNorm
from semcl.methods.hierarchical_triplet import HierarchicalTriplet
from semcl.methods.metric_learning import FastAP, RankMarginTriplet
from semcl.methods.paco import ParametricContrastive
from semcl.methods.ranked_contrastive import RankedContrastive
from semcl.methods.ride import Ride
from semcl.methods.scl_two_heads import SCLTwoHeads

METHODS: dict[str, type[Method]] = {
    "ce": CrossEntropy,
    "ce_sa": CrossEntropy,
    "label_smoothing_superclass": LabelSmoothingSuperclass,
    "two_heads": TwoHeads,
    "scl": RankedContrastive,
    "rince": RankedContrastive,
    "scl_two_heads": SCLTwoHeads,
    "triplet": RankMarginTriplet,
    "fastap": FastAP,
    "hierarchical_triplet": HierarchicalTriplet,
    "balanced_softmax": BalancedSoftmax,
    "paco": ParametricContrastive,
    "gpaco": ParametricContrastive,
    "supcon": ParametricContrastive,
    "multitask": ParametricContrastive,
    "ride": Ride,
    "decouple_crt": DecoupleCRT,
    "decouple_tau_norm": DecoupleTauNorm,
    "decouple_lws": DecoupleLWS,
}

__all__ = ["METHODS", "DataInfo", "Method"]
