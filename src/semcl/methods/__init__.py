"""The method registry: config name -> class. Kept in step with semcl.config.METHOD_SCHEMAS."""

from semcl.methods.base import DataInfo, Method
from semcl.methods.ce import CrossEntropy
from semcl.methods.ranked_contrastive import RankedContrastive

METHODS: dict[str, type[Method]] = {
    "ce": CrossEntropy,
    "ce_sa": CrossEntropy,
    "scl": RankedContrastive,
    "rince": RankedContrastive,
}

__all__ = ["METHODS", "DataInfo", "Method"]
