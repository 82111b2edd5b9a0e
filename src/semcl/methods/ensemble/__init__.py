"""Logit-sum ensembles of finished runs (GPaCo's ImageNet-LT / iNat "ensemble" rows)."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class EnsembleMethod:
    """Logit-sum ensemble of the row's `ensemble` member runs (official evaluation: sum of logits);
    trains nothing, reads the members' saved test logits."""

    name: str = "ensemble"


ENSEMBLE = MethodSpec("ensemble", EnsembleMethod, "semcl.methods.ensemble.method:LogitEnsemble", train_cost=0.0,
                      depends="ensemble", summary="sum of the member runs' test logits", builder=None,
                      on_gpu=False, computes="semcl.methods.ensemble.method:ensemble_metrics")
