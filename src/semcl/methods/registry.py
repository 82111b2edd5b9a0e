"""The method registry: one line per method. Torch-free (specs name their classes lazily).

Adding a method: a package semcl/methods/<family>/ with its config schema and MethodSpec in
__init__.py and its Method subclass in method.py, then one line here (see CONTRIBUTING.md).
"""

from __future__ import annotations

from semcl.methods import (
    balanced_softmax,
    ce,
    ce_baselines,
    decouple,
    distill,
    ensemble,
    hierarchical_triplet,
    hsa,
    metric_learning,
    paco,
    ranked_contrastive,
    ride,
    scl_two_heads,
    scns_supcon,
    segmentation,
    semi,
    transfer,
    video_rank,
    vit,
)
from semcl.methods.spec import MethodSpec, PlannedMethod

METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    ce.CE,
    ce.CE_SA,
    balanced_softmax.BALANCED_SOFTMAX,
    ce_baselines.LABEL_SMOOTHING_SUPERCLASS,
    ce_baselines.TWO_HEADS,
    ranked_contrastive.SCL,
    ranked_contrastive.RINCE,
    scl_two_heads.SCL_TWO_HEADS,
    metric_learning.TRIPLET,
    metric_learning.FASTAP,
    hierarchical_triplet.HIERARCHICAL_TRIPLET,
    paco.PACO,
    paco.GPACO,
    paco.SUPCON,
    paco.MULTITASK,
    ride.RIDE,
    decouple.DECOUPLE_CRT,
    decouple.DECOUPLE_TAU_NORM,
    decouple.DECOUPLE_LWS,
    ensemble.ENSEMBLE,
    hsa.HSA,
    hsa.MOCOV2,
    semi.SEMI_FINETUNE,
    transfer.DETECTRON2_TRANSFER,
    distill.KD_TEACHER,
    distill.KD_STUDENT,
    *distill.STUDENTS,
    segmentation.SEG_BASELINE,
    segmentation.GPACO_SEG,
    *video_rank.VIDEO_SPECS,
    scns_supcon.SPEC,
    scns_supcon.INSTANCE_SPEC,
    vit.MAE_FINETUNE,
    vit.MULTITASK_VIT,
    vit.GPACO_VIT,
)}

# what a config without `method.name` trains (tests and hand-written configs)
DEFAULT_METHOD = "ce"

# Methods the registry may name before their training code exists: rows using them are listed as
# "not implemented" and never planned.
PLANNED_METHODS: dict[str, PlannedMethod] = {p.name: p for p in (
    PlannedMethod("mmseg_seg", "UperNet-Swin / DeepLabV3+ R-18 segmentation (+/- GPaCo) through MMSegmentation configs "
                               "(python -m semcl.methods.segmentation.mmseg_export); not trainable in the suite"),
)}


def method_spec(name: str) -> MethodSpec:
    """The spec of `method.name`; KeyError with the known names otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}") from None


def method_class(name: str):
    """The Method subclass of `method.name` (imports it, and torch)."""
    return method_spec(name).load()
