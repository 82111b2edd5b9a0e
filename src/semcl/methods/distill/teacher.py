"""The frozen teacher of a student run: loading it from the teacher run's state, and the one pass over
the un-augmented training images that the `cached` mode reads (docs/papers/scns.md §g.1)."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml
from torch import nn

from semcl.data import stats
from semcl.data.registry import DATASETS
from semcl.data.views.build import build_augment
from semcl.errors import ResultsError
from semcl.methods.base import Dependency
from semcl.store.run_folder import RunFolder
from semcl.yaml_strict import StrictLoader

PASS_BATCH = 256  # images per forward of the caching pass (eval mode: the result does not depend on it)


def image_size(cfg) -> int:
    """Side of the training images: data.image_size where set, else the dataset's native size."""
    if cfg.data.image_size:
        return int(cfg.data.image_size)
    info = DATASETS.get(cfg.data.name)
    if info is None:
        raise ValueError(f"dataset {cfg.data.name!r}: set data.image_size (the KD networks need the input size)")
    return info.synthetic_side if cfg.data.synthetic else info.size


def run_backbone(dep: Dependency) -> str | None:
    """The backbone a dependency run trained, from its config.yaml (a KD teacher's method.teacher_arch
    first); None if the run has no config file or names none."""
    cfg_file = RunFolder(Path(dep.run_dir)).config
    if not cfg_file.exists():
        return None
    try:
        doc = yaml.load(cfg_file.read_text(), Loader=StrictLoader)  # a repeated key is refused too
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ResultsError(f"{cfg_file}: truncated or invalid YAML{where} ({getattr(err, 'problem', None) or err}); "
                           f"move teacher run {dep.run_id}'s folder away to retrain it") from None
    saved = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(saved, dict):
        raise ResultsError(f"{cfg_file}: key 'config' missing or not a mapping; "
                           f"move teacher run {dep.run_id}'s folder away to retrain it")
    return (saved.get("method") or {}).get("teacher_arch") or (saved.get("model") or {}).get("backbone")


def load_backbone_weights(net: nn.Module, dep: Dependency, arch: str) -> None:
    """Load the run's `backbone.*` weights into `net` (built as `arch`), strictly; one-line errors."""
    state = dep.load_state()
    sub = {k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")}
    if not sub:
        raise ValueError(f"run {dep.run_id}: its state has no 'backbone.*' weights")
    try:
        net.load_state_dict(sub, strict=True)
    except RuntimeError as err:
        raise ValueError(f"run {dep.run_id} does not fit {arch!r}: {str(err).splitlines()[0]}") from None


def load_teacher(teacher: nn.Module, dep: Dependency, arch: str) -> None:
    """Load the teacher run's `backbone.*` weights into `teacher`, strictly; a teacher run whose config names
    another backbone than `arch` (the student's method.teacher_arch) is refused with both names."""
    other = run_backbone(dep)
    if other is not None and other != arch:
        raise ValueError(f"{Path(dep.run_dir) / 'config.yaml'}: teacher run {dep.run_id} trained {other!r}, but the "
                         f"student's method.teacher_arch is {arch!r}")
    load_backbone_weights(teacher, dep, arch)


def plain_transform(cfg, size: int):
    """The deterministic evaluation transform (resize only + normalisation): the 'un-augmented' input."""
    mean, std = stats(cfg.data.name)
    return build_augment("test", size=size, mean=mean, std=std)


@torch.no_grad()
def teacher_pass(teacher: nn.Module, images: torch.Tensor, transform, feat_ids: tuple[int, ...],
                 device: torch.device, preact: bool = False) -> dict[str, torch.Tensor]:
    """Teacher outputs of every image in eval mode: {"logits": [N, C], "feat<i>": [N, ...] for i in
    feat_ids}, float32 on the CPU."""
    was = teacher.training
    teacher.eval()
    gen = torch.Generator().manual_seed(0)  # the test transform draws nothing
    out: dict[str, list[torch.Tensor]] = {"logits": [], **{f"feat{i}": [] for i in feat_ids}}
    try:
        for lo in range(0, images.shape[0], PASS_BATCH):
            x = transform(images[lo:lo + PASS_BATCH], gen).to(device)
            feats, logits = teacher.forward_features(x, preact=preact)
            out["logits"].append(logits.float().cpu())
            for i in feat_ids:
                out[f"feat{i}"].append(feats[i].float().cpu())
    finally:
        teacher.train(was)
    return {k: torch.cat(v) for k, v in out.items()}
