"""Decouple (Kang et al., ICLR 2020): second stages on a cross-entropy run's frozen backbone."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

SAMPLING = {"sampling": frozenset({"class_balanced", "instance"})}


@dataclass
class DecoupleCRTMethod:
    """Decouple cRT (Kang et al. 2020): a fresh linear classifier re-trained on the base run's frozen backbone."""

    name: str = "decouple_crt"
    sampling: str = "class_balanced"  # class_balanced | instance


@dataclass
class DecoupleTauNormMethod:
    """Decouple tau-normalisation: the base classifier's rows divided by ||w_j||^tau, no bias, no training.

    Kang et al. pick tau on a validation set (their tau_norm.py sweeps 0..2): `tau_select: val` does
    the same on the dataset's val split (top-1 over `tau_grid`, default 0.0, 0.1, ..., 2.0); without
    it the fixed `tau` is used.
    """

    name: str = "decouple_tau_norm"
    tau: float = 1.0
    tau_select: str | None = None  # val: choose tau on the val split (ImageNet-LT / Places-LT val files)
    tau_grid: list[float] | None = None


@dataclass
class DecoupleLWSMethod:
    """Decouple LWS: one learned scale per class on the base run's frozen backbone and classifier."""

    name: str = "decouple_lws"
    sampling: str = "class_balanced"  # class_balanced | instance


# stage 2 runs the frozen backbone forward only: a third of a fwd+bwd; tau-norm trains nothing
DECOUPLE_CRT = MethodSpec("decouple_crt", DecoupleCRTMethod, "semcl.methods.decouple.method:DecoupleCRT",
                          train_cost=1 / 3, depends="init_from", choices=SAMPLING,
                          summary="classifier re-training on a frozen base backbone",
                          losses=("torch.nn.functional:cross_entropy",))
DECOUPLE_TAU_NORM = MethodSpec("decouple_tau_norm", DecoupleTauNormMethod, "semcl.methods.decouple.method:DecoupleTauNorm",
                               train_cost=0.0, depends="init_from", choices={"tau_select": frozenset({"val"})},
                               summary="tau-normalised base classifier")
DECOUPLE_LWS = MethodSpec("decouple_lws", DecoupleLWSMethod, "semcl.methods.decouple.method:DecoupleLWS",
                          train_cost=1 / 3, depends="init_from", choices=SAMPLING,
                          summary="learned per-class weight scales on a frozen base model",
                          losses=("torch.nn.functional:cross_entropy",))
