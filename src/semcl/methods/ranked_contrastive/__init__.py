"""SCL and RINCE (ranked InfoNCE) with a momentum key encoder and a memory bank of keys and labels."""

from dataclasses import dataclass, field
from typing import Any

from semcl.methods.spec import MethodSpec

# The official CIFAR code's floor: `sum_in_log` / `sum_out_log` drop every term whose probability is
# <= 1e-7 before the mean (docs/papers/rince.md §c.8); semcl.losses.ranked_info_nce(prob_floor=...).
OFFICIAL_PROB_FLOOR = 1e-7
DEFAULT_NAME_MODEL = "all-MiniLM-L6-v2"  # = semcl.data.semantics.name_similarity.DEFAULT_MODEL (this module is torch-free)


@dataclass
class SCLMethod:
    name: str = "scl"
    form: str = "in"  # in | out | khosla_out
    tau: float = 0.1
    bank_size: int = 4096
    momentum: float = 0.99
    # None = the paper's plain mean (0.0); 1e-7 = the official code (rows "SCL-in/out (official code)").
    # None, not 0.0, so that the run ids of rows that leave it unset do not change.
    prob_floor: float | None = None
    # when the key encoder's momentum update runs: None = after the loss, keys from the previous EMA
    # state (CIFAR branch); "before_keys" = before the key forward (ImageNet branch,
    # boschresearch/rince@1a060ae losses.py:104). None, not "after_loss", keeps unset rows' run ids.
    key_update: str | None = None

    def __post_init__(self) -> None:
        _check_floor(self.prob_floor)


# Named RINCE variants (default official_code, the paper text "paper"): each fills the knobs of RinceMethod
# left unset.
RINCE_VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {"positives": "rank", "rank_reduction": "sum", "key_first_rank_only": False},
    # official CIFAR branch: cumulative rank-2 positives, mean over ranks, own key only in rank 1
    "code": {"positives": "cumulative", "rank_reduction": "mean", "key_first_rank_only": True},
    # "code" + the official 1e-7 probability floor (sum_in_log / sum_out_log): what trained the
    # released CIFAR checkpoints (docs/papers/rince.md §c.8, §g)
    "official_code": {"positives": "cumulative", "rank_reduction": "mean", "key_first_rank_only": True,
                      "prob_floor": OFFICIAL_PROB_FLOOR},
    # the README's "RINCE out-in" command as printed: it passes `mixed_out_in_log True`, which only
    # renames the run (the loss reads `mixed_out_in`, default False), so it trains RINCE-in with the
    # official code's semantics (docs/papers/rince.md §d.1, §g.1). The row keeps form out_in (what the README
    # means); the loss runs the form in VARIANT_FORMS.
    "readme_literal": {"positives": "cumulative", "rank_reduction": "mean", "key_first_rank_only": True,
                       "prob_floor": OFFICIAL_PROB_FLOOR},
}
# form actually trained, per variant, where it differs from method.form
VARIANT_FORMS: dict[str, dict[str, str]] = {"readme_literal": {"out_in": "in"}}


@dataclass
class RinceMethod:
    name: str = "rince"
    form: str = "in"  # in | out | out_in | khosla_out
    taus: list[float] = field(default_factory=lambda: [0.1, 0.225])
    ranks: str = "superclass"  # how ranks are built: superclass | names (class-name similarity)
    sibling_sim: float = 0.75
    bank_size: int = 4096
    momentum: float = 0.99
    # a key of RINCE_VARIANTS; fills the knobs below when unset. The default is what the registry's default rows
    # run (the official code's loss, which trained the released checkpoints; docs/papers/rince.md §c.8); the
    # summed paper text is "paper", named on the rows that run it. Every registry row names its variant.
    variant: str = "official_code"
    positives: str | None = None  # rank | cumulative
    rank_reduction: str | None = None  # sum | mean
    key_first_rank_only: bool | None = None
    prob_floor: float | None = None  # None = 0.0 (no floor); the variants official_code / readme_literal: 1e-7
    # ranks "names" (ImageNet-100): class j is a rank-2 positive of i when S[i, j] >= name_threshold,
    # S the cosine similarity of the class names' sentence embeddings (docs/papers/rince.md §c.6). The threshold is
    # a number or "paper" (0.45) / "readme" (0.4); the matrix comes from name_similarity_file when given
    # (e.g. the official word_sims_imagenet100.npy), else from the sentence-transformer name_model.
    name_threshold: float | str | None = None
    name_model: str | None = None
    name_similarity_file: str | None = None
    # optional pin: the sha256 (name_similarity.similarity_sha256) the matrix must have. The run id is a
    # hash of the config, so it holds the model name / file path but not the file's content unless pinned.
    name_similarity_sha256: str | None = None
    key_update: str | None = None  # as SCLMethod.key_update: None (after the loss) | "before_keys"

    def __post_init__(self) -> None:
        if self.variant not in RINCE_VARIANTS:
            return  # the schema's `choices` names the bad value with the file and key
        for knob, value in RINCE_VARIANTS[self.variant].items():
            if getattr(self, knob) is None:
                setattr(self, knob, value)
        if self.form == "out_in" and len(self.taus) < 2:
            raise ValueError("'method.form' = 'out_in' needs at least two temperatures in 'method.taus'")
        _check_floor(self.prob_floor)
        names_keys = (self.name_threshold, self.name_model, self.name_similarity_file, self.name_similarity_sha256)
        if self.ranks != "names" and any(v is not None for v in names_keys):
            raise ValueError("method.name_threshold / name_model / name_similarity_file need method.ranks: names")
        if self.ranks == "names":
            if self.name_threshold is None:
                self.name_threshold = "paper"
            if isinstance(self.name_threshold, str) and self.name_threshold not in ("paper", "readme"):
                raise ValueError(f"method.name_threshold {self.name_threshold!r}: a number, 'paper' (0.45) "
                                 f"or 'readme' (0.4)")
            if self.name_model is not None and self.name_similarity_file is not None:
                raise ValueError("give one of method.name_model and method.name_similarity_file")
            if self.name_model is None and self.name_similarity_file is None:
                # explicit in the config, hence in the run id (semcl.data.semantics.name_similarity.DEFAULT_MODEL)
                self.name_model = DEFAULT_NAME_MODEL

    @property
    def loss_form(self) -> str:
        """The form the loss runs: method.form, except where the variant trains another (readme_literal)."""
        return VARIANT_FORMS.get(self.variant, {}).get(self.form, self.form)


def _check_floor(floor: float | None) -> None:
    if floor is not None and not 0.0 <= floor < 1.0:
        raise ValueError(f"method.prob_floor must lie in [0, 1), got {floor}")


KEY_UPDATES = frozenset({"after_loss", "before_keys"})
_RANKED_LOSSES = ("semcl.losses.ranked:ranked_info_nce",)
SCL = MethodSpec("scl", SCLMethod, "semcl.methods.ranked_contrastive.method:RankedContrastive",
                 choices={"form": frozenset({"in", "out", "khosla_out"}), "key_update": KEY_UPDATES},
                 summary="supervised contrastive, one rank", losses=_RANKED_LOSSES)
RINCE = MethodSpec("rince", RinceMethod, "semcl.methods.ranked_contrastive.method:RankedContrastive",
                   choices={"form": frozenset({"in", "out", "out_in", "khosla_out"}),
                            "variant": frozenset(RINCE_VARIANTS),
                            "ranks": frozenset({"superclass", "names"}), "positives": frozenset({"rank", "cumulative"}),
                            "rank_reduction": frozenset({"sum", "mean"}), "key_update": KEY_UPDATES},
                   summary="ranked InfoNCE, one term per rank with rising temperatures", losses=_RANKED_LOSSES)
