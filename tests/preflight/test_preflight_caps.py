"""The preflight's caps on what is not the engine's one-step work (issue 22): a fixed-structure batch shrunk
to the small batch (hierarchical triplet) instead of a retry at the entry's 512, 2 clips per test video,
2 images per robustness set (ImageNet-C: 75 of them), SCNS-instance's stand-in at 1 image per class (its
teacher passes over all). Each applies to the check's config only: the rows' run configs keep their values."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from semcl.data.imageset import ImageSet
from semcl.evals.protocols import robustness
from semcl.methods.hierarchical_triplet.method import HierarchicalTriplet
from semcl.methods.registry import METHODS
from semcl.preflight.check import check_config, check_run, distinct_runs, stand_in_images_per_class
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store


def _run(table: str, label: str, profile: str = "paper"):
    return next(r for r in plan_runs(get_table(table), profile) if r.row_label == label)


def _structure(cfg) -> tuple[int, int, int, int]:
    m = cfg.method
    return m.l_prime, m.c, m.t, cfg.optim.batch_size


def test_a_fixed_structure_batch_is_shrunk_to_the_small_batch_only_in_the_check():
    run = _run("rince/tab2", "Hierarchical triplet")
    assert _structure(run.config) == (30, 10, 182, 512)
    # one anchor, two of its nearest class, one random: 1 + 1 * 2 + 1 = 4
    assert _structure(check_config(run, None, 4)) == (1, 2, 1, 4)
    assert _structure(check_config(run, None, 8)) == (1, 2, 5, 8)
    # at the full batch (the retry) the row's own structure
    assert _structure(check_config(run, None, 512)) == (30, 10, 182, 512)
    # a row whose structure does not add up keeps it: the check fails as the run would
    bad = dataclasses.replace(run, config=dataclasses.replace(
        run.config, optim=dataclasses.replace(run.config.optim, batch_size=500)))
    assert _structure(check_config(bad, None, 4)) == (30, 10, 182, 4)
    assert METHODS["hierarchical_triplet"].stand_in.batch_of(bad.config, 4) == {}
    # methods without such a structure declare nothing
    assert check_config(_run("rince/tab2", "Cross-entropy"), None, 4).method == _run("rince/tab2", "Cross-entropy").config.method


@pytest.mark.usefixtures("single_thread")
def test_the_shrunk_triplet_batch_runs_the_method_s_sampler_and_loss_once(tmp_path, monkeypatch):
    table = get_table("rince/tab2")
    (run,) = [r for r in distinct_runs(table, "smoke") if r.row_label == "Hierarchical triplet"]
    assert _structure(run.config) == (6, 5, 64, 100)
    seen = []
    step = HierarchicalTriplet.loss

    def record(self, batch):
        seen.append((self.l_prime, self.c, self.t, batch.labels.tolist()))
        return step(self, batch)

    monkeypatch.setattr(HierarchicalTriplet, "loss", record)
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    res = check_run(run, table, Store(tmp_path), table.resources_for(run.row_label, "smoke"), 80.0)
    assert res.error is None
    # one step at batch 4 (no second check at 100): anchor a, then two images of one other class
    ((l_prime, c, t, labels),) = seen
    assert (l_prime, c, t, len(labels)) == (1, 2, 1, 4)
    assert labels[1] == labels[2] != labels[0]


def test_video_clips_and_robustness_images_are_capped_in_the_check_only():
    video = _run("rince/tab4", "RINCE (torchvision r3d_18)")
    assert video.config.eval.video_clips == 10  # the run scores 10 clips per test video
    assert check_config(video, None, 4).eval.video_clips == 2
    one = dataclasses.replace(video, config=dataclasses.replace(
        video.config, eval=dataclasses.replace(video.config.eval, video_clips=1)))
    assert check_config(one, None, 4).eval.video_clips == 1  # a row's smaller count stays
    rob = _run("gpaco/mae-robustness", "GPaCo ResNet-50")
    assert rob.config.eval.robustness and rob.config.eval.robustness_limit is None
    assert check_config(rob, None, 4).eval.robustness_limit == 1


def test_a_robustness_set_is_scored_on_its_first_limit_images():
    # 4 images of classes a, b, a, b; the classifier's logits favour class a for every image
    s = ImageSet("toy", torch.zeros(4, 3, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 0, 1]), ("a", "b"))
    calls = []

    def classify(x):
        calls.append(len(x))
        return torch.tensor([[1.0, 0.0]]).repeat(len(x), 1)

    def ctx(limit):
        cfg = SimpleNamespace(eval=SimpleNamespace(robustness_limit=limit))
        return SimpleNamespace(cfg=cfg, classify=classify, test_transform=lambda x, g: x,
                               train=SimpleNamespace(class_names=("a", "b")))

    assert robustness._score(ctx(None), s, "toy") == 50.0 and calls == [4]
    assert robustness._score(ctx(1), s, "toy") == 100.0 and calls == [4, 1]  # image 0 (class a) alone


def test_scns_instance_s_stand_in_has_one_image_per_class_enough_for_its_pools():
    run = _run("scns/kd-tinyimagenet", "SCNS-instance ResNet50 to vgg8")
    assert run.config.method.k == 10
    assert stand_in_images_per_class(run) == 1  # 199 other-class images >= k 10; 200 teacher forwards, not 400
    # a k above the other classes' count takes more: k 250 over 199 other classes -> 2 each
    big = dataclasses.replace(run, config=dataclasses.replace(
        run.config, method=dataclasses.replace(run.config.method, k=250)))
    assert stand_in_images_per_class(big) == 2
    # other students keep the default
    assert stand_in_images_per_class(_run("scns/kd-tinyimagenet", "Student wrn_16_2")) == 2


def test_the_evaluations_train_on_one_image_of_at_most_twenty_classes():
    from semcl.preflight.check import EVAL_TRAIN_IMAGES, _few

    cifar100 = torch.arange(100).repeat_interleave(3)  # 3 images of each of 100 classes, in class order
    picked = _few(cifar100)
    assert EVAL_TRAIN_IMAGES == 20 and len(picked) == 20
    assert picked.tolist() == sorted(picked.tolist()) and len(set(cifar100[picked].tolist())) == 20
    # spread over the classes, not the first twenty: classes 0, 5, 10, ..., 99 (evenly spaced, rounded)
    assert cifar100[picked].tolist() == torch.linspace(0, 99, 20).round().long().tolist()
    ten = torch.arange(10).repeat_interleave(4)
    assert sorted(ten[_few(ten)].tolist()) == list(range(10))  # fewer classes: one image of each


def test_a_fresh_dependency_state_is_built_once_per_process(monkeypatch, tmp_path):
    from semcl.preflight import check as check_module
    from semcl.store import Store

    built = []
    monkeypatch.setattr(check_module, "_FRESH", {})
    monkeypatch.setattr(check_module, "_build_fresh_state", lambda run, reduce, store: built.append(run.run_id) or {})
    teacher = _run("scns/kd-cifar100", "Teacher resnet56")
    other = _run("scns/kd-cifar100", "Teacher resnet110")
    store = Store(tmp_path)
    first = check_module._fresh_state(teacher, None, store)
    assert check_module._fresh_state(teacher, None, store) is first  # the second student of this teacher reads it
    check_module._fresh_state(other, None, store)
    check_module._fresh_state(teacher, None, Store(tmp_path / "other"))  # another scratch store: built again
    assert built == [teacher.run_id, other.run_id, teacher.run_id]


def test_the_check_runs_each_evaluation_at_its_own_quick_settings():
    """The check's `eval` settings are what the evaluations declare (Evaluation.quick), nothing named in the
    preflight: GPaCo's latency row is timed once at batch 2 and its OOD sets (where present) cut to 8 images; a row
    without latency keeps its latency keys unset."""
    from semcl.evals.protocols import EVALUATIONS

    timed = next(r for r in distinct_runs(get_table("gpaco/fig1a"), "paper") if r.config.eval.latency)
    cfg = check_config(timed, None, 4)
    assert (cfg.eval.latency_batch, cfg.eval.latency_repeats) == (2, 1)
    assert EVALUATIONS["latency"].quick(timed.config.eval) == {"latency_batch": 2, "latency_repeats": 1}
    assert cfg.eval.ood_limit == 8 and EVALUATIONS["ood"].quick(timed.config.eval) == {"ood_limit": 8}
    untimed = _run("rince/tab2", "Cross-entropy")
    assert not untimed.config.eval.latency and EVALUATIONS["latency"].quick(untimed.config.eval) == {}
    assert check_config(untimed, None, 4).eval.latency_repeats is None
