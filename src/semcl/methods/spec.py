"""What the spine knows about a method: its name, config schema, class, training cost and the runs it
builds on. Torch-free, so `semcl list` / `plan` validate configs without importing torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# How a row's runs read other runs (registry key of the row -> what the method receives):
#   init_from: one base run's final weights (a second stage: Decouple)
#   ensemble:  one or more member runs' saved test logits (logit-sum ensembles)
#   teacher:   one frozen teacher run's final weights (knowledge distillation)
# (the value: how errors name such a run)
DEPENDENCY_KINDS = {"init_from": "base run", "ensemble": "ensemble member", "teacher": "teacher run"}
# the file of a finished run that a run depending on it reads, per kind (a RunFolder property, semcl.store.run_folder)
DEPENDENCY_FILES = {"init_from": "checkpoint", "ensemble": "logits", "teacher": "checkpoint"}


@dataclass(frozen=True)
class Networks:
    """The networks a run of a method trains and runs, as the cost model and `semcl export` need them."""

    trained: str  # the network whose weights the run trains (a backbone, ViT or video net name)
    family: str = "image"  # image | vit | video: which cost table and which export formats apply
    frames: int = 1  # frames per clip (video)
    teacher: str | None = None  # a frozen network the step runs forward (a KD student's teacher)


@dataclass(frozen=True)
class ExternalJob:
    """The GPU work of a run that another program does (detectron2): that program's published pace and memory,
    since its step is not ours to time or fake. `source`: where a user reads the figures."""

    iterations: int  # steps of the whole run (every trial)
    seconds_per_iter: float  # on `gpus` GPUs of the published run
    gpus: int
    mem_gb: float  # peak per GPU as published
    source: str


def trains_model_backbone(method_cfg: Any, model_cfg: Any) -> Networks:
    """The default `networks`: the run trains `model.backbone` and nothing else."""
    return Networks(model_cfg.backbone)


def serves_any_dataset(method_cfg: Any, num_classes: int) -> None:
    """The default `check_dataset`: the method works with any class count."""


@dataclass(frozen=True)
class StandIn:
    """What the preflight's synthetic stand-in needs for a row of this method (semcl.preflight.check), as data:
    the preflight reads it, the Method class never hears of the preflight. Functions are "module:function" strings
    (imported on use, so the spec stays torch-free) or plain functions of the row's config."""

    # `method.<field>` holding how many other training images one search takes (a kNN's k): the stand-in set then
    # holds more than that; None: no such search
    neighbours: str | None = None
    # (run config, classes) -> training images per class of the stand-in, for a method whose own work passes over
    # every training image (a teacher's caching pass); None: the preflight's default
    per_class: Callable[[Any, int], int] | None = None
    # (run config, small batch) -> method fields giving a batch of fixed structure (hierarchical triplet:
    # l' + l'c + t images) the preflight's small batch; {} where the row's fields stand (or are wrong: reported)
    batch: Callable[[Any, int], dict] | None = None
    # "module:function" (method, data_root) -> paths: writes, in their real layout, files under the data root that
    # the run reads and no dataset writer makes (a pre-trained checkpoint); called on stand-in roots only
    files: str | None = None
    # "module:function" (method) -> (D, k, backend) of the kNN search over every training image at each refresh
    # (HSA), for the memory figure of semcl.preflight.fake; None: no such search
    mining: str | None = None

    def neighbours_of(self, method_cfg: Any) -> int:
        return int(getattr(method_cfg, self.neighbours)) if self.neighbours else 0

    def per_class_of(self, cfg: Any, classes: int) -> int | None:
        return self.per_class(cfg, classes) if self.per_class else None

    def batch_of(self, cfg: Any, batch: int) -> dict:
        return self.batch(cfg, batch) if self.batch else {}

    def write_files(self, method: Any, data_root: Any) -> list:
        """`files` for a built `method` on a stand-in `data_root`: the paths written ([]: none)."""
        return load_function(self.files)(method, data_root) if self.files else []

    def mining_of(self, method: Any) -> tuple[int, int, str] | None:
        """`mining` for a built `method` (None: no such search)."""
        return load_function(self.mining)(method) if self.mining else None


def load_function(ref: str) -> Callable:
    """The function a "module:function" string names (imports its module)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class MethodSpec:
    """One method as the spine sees it; registered by one line in semcl.methods.registry.METHODS."""

    name: str  # `method.name` in configs and registry rows
    schema: type  # the config dataclass of `method.*`
    cls: str | type  # the Method subclass, or "package.module:Class" in the module defining the class (imported at start)
    # training FLOPs per image-epoch relative to one fwd+bwd of the backbone; a function of the method's
    # config where the method's knobs change it (HSA's positives, multi-crop)
    train_cost: float | Callable[[Any], float] = 4 / 3
    depends: str | None = None  # a kind of DEPENDENCY_KINDS that every row of this method must name
    # allowed values of the schema's string fields (`method.<field>`), checked when a config is built
    choices: dict[str, frozenset[str]] = field(default_factory=dict)
    summary: str = ""
    # check_dataset(method_cfg, num_classes): raises semcl.errors.ConfigError ("method.<key> = ...: why") when
    # the run's dataset (its class count; the synthetic stand-in's under data.synthetic) cannot serve the
    # config; the registry calls it for every row under every profile, so such a run fails at load, not at start
    check_dataset: Callable[[Any, int], None] = serves_any_dataset
    # the loss functions its Method class calls, as "module:function" strings naming the module that defines
    # each (not a re-exporting package), so `semcl show --files` can point at the code behind a row
    losses: tuple[str, ...] = ()
    # what builds its network: "module:function" (or class) of the builder the Method class calls; None
    # where the method builds no network of its own (logit ensembles, external trainers)
    builder: str | None = "semcl.models.backbones:build_backbone"
    # networks(method_cfg, model_cfg) -> Networks: what the run trains (a ViT's `arch`, a video net and its frames,
    # a KD teacher run's `teacher_arch`) and the frozen teacher a student runs; the spine asks this, never the config
    networks: Callable[[Any, Any], Networks] = trains_model_backbone
    # False: the run computes on the CPU alone (a logit ensemble sums its members' saved logits), so its job
    # holds no GPU whatever its table's profile asks (semcl.registry.tables: Table.resources_for)
    on_gpu: bool = True
    # external_job(method_cfg) -> ExternalJob: a run whose GPU work is another program's (detectron2 transfer);
    # the estimate and the preflight's memory figure are that program's published ones
    external_job: Callable[[Any], ExternalJob] | None = None
    # the depth of the projector the method builds whatever `model.head_layers` says (GPaCo's fixed 3-layer MLP):
    # the built config records it, so a run's config says what was built; None: the method reads model.head_layers
    head_layers: int | None = None
    # the preflight's stand-in needs (StandIn)
    stand_in: StandIn = field(default_factory=StandIn)
    # with several ranks, each draws its own in-model randomness (dropout, drop-path masks) from seed + rank after
    # the modules are built, as MAE's main_finetune.py seeds (the augmentations keep the epoch's stream)
    rank_seeded: bool = False
    # "module:function" (run config, dependencies) -> metrics: a run computed from finished runs alone, with no
    # data and no training of its own (a logit ensemble, a detectron2 transfer); None: the run trains and is evaluated
    computes: str | None = None

    def __post_init__(self) -> None:
        if self.depends is not None and self.depends not in DEPENDENCY_KINDS:
            raise ValueError(f"method {self.name!r}: depends={self.depends!r} is not one of {tuple(DEPENDENCY_KINDS)}")
        if getattr(self.schema, "name", None) != self.name:
            raise ValueError(f"method {self.name!r}: its schema's default name is {getattr(self.schema, 'name', None)!r}")

    def cost(self, method_cfg: Any) -> float:
        """`train_cost` for this method config."""
        return self.train_cost(method_cfg) if callable(self.train_cost) else self.train_cost

    def load(self) -> Any:
        """The Method subclass (imports it, and torch, on first use)."""
        return self.cls if not isinstance(self.cls, str) else load_function(self.cls)

    def computed_metrics(self, cfg: Any, deps: list) -> dict[str, float] | None:
        """`computes`' metrics for the run (None: it trains)."""
        return load_function(self.computes)(cfg, deps) if self.computes else None


@dataclass(frozen=True)
class PlannedMethod:
    """A method the registry may name before its training code exists: its rows show as not implemented."""

    name: str
    summary: str
