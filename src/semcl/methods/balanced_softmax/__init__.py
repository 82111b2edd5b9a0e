"""Balanced Softmax (Ren et al., NeurIPS 2020): cross-entropy on logits + log(class prior)."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class BalancedSoftmaxMethod:
    """Cross-entropy on logits + log(class prior) (Ren et al. 2020); evaluated on raw logits."""

    name: str = "balanced_softmax"


BALANCED_SOFTMAX = MethodSpec("balanced_softmax", BalancedSoftmaxMethod,
                              "semcl.methods.balanced_softmax.method:BalancedSoftmax", train_cost=1.0,
                              summary="cross-entropy with the log class prior added to the logits",
                               losses=("torch.nn.functional:cross_entropy",))
