"""The method registry: config name -> class. Kept in step with semcl.config.METHOD_SCHEMAS."""

from semcl.methods.balanced_softmax import BalancedSoftmax
from semcl.methods.base import DataInfo, Method
from semcl.methods.ce import CrossEntropy
from semcl.methods.decouple import DecoupleCRT, DecoupleLWS, DecoupleTauNorm
from semcl.methods.paco import ParametricContrastive
from semcl.methods.ranked_contrastive import RankedContrastive
from semcl.methods.ride import Ride

METHODS: dict[str, type[Method]] = {
    "ce": CrossEntropy,
    "ce_sa": CrossEntropy,
    "scl": RankedContrastive,
    "rince": RankedContrastive,
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
