"""scns_supcon: the bank SupCon loss against a float64 loop over the formula, and one training step."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from semcl.losses.scns_supcon import bank_supcon_loss
from semcl.methods.base import Batch, DataInfo, TrainContext, run_step
from semcl.methods.scns_supcon.method import SCNSSupCon
from semcl.run_config import build_config


def _reference(z, labels, negatives, tau):
    """L = mean_a −1/|P(a)| Σ_p log(e^{s_ap} / (Σ_{p'∈P(a)} e^{s_ap'} + Σ_k e^{z_a·m_k/τ})), plain loops."""
    b = labels.shape[0]
    total = 0.0
    for a in range(2 * b):
        ya = int(labels[a % b])
        pos = [p for p in range(2 * b) if p != a and int(labels[p % b]) == ya]
        den = sum(math.exp(float(z[a] @ z[p]) / tau) for p in pos)
        den += sum(math.exp(float(z[a] @ m) / tau) for m in negatives[a % b])
        total += -sum(float(z[a] @ z[p]) / tau - math.log(den) for p in pos) / len(pos)
    return total / (2 * b)


def test_bank_supcon_loss_equals_the_formula():
    g = torch.Generator().manual_seed(0)
    z = F.normalize(torch.randn(8, 5, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 1, 0, 2])
    negs = F.normalize(torch.randn(4, 6, 5, generator=g, dtype=torch.float64), dim=2)
    got = bank_supcon_loss(z, labels, negs, 0.1)
    assert float(got) == pytest.approx(_reference(z, labels, negs, 0.1), rel=1e-10)


def _method(negatives="uniform", **m):
    cfg = build_config({"data": {"name": "cifar10", "image_size": 8}, "model": {"backbone": "resnet_tiny", "head_hidden": 16,
                                                                             "head_dim": 4},
                        "method": {"name": "scns_supcon", "negatives": negatives, "num_negatives": 3, **m}}, where="test")
    labels = torch.arange(12) % 3
    info = DataInfo(3, 3, None, torch.bincount(labels), ("cat", "dog", "truck"))
    torch.manual_seed(0)
    method = SCNSSupCon(cfg, info)
    method.on_train_start(TrainContext(SimpleNamespace(labels=labels), [], torch.device("cpu"), None, 0))
    return method, labels


def test_training_step_is_the_loss_on_its_own_modules_and_draws_other_class_negatives():
    method, labels = _method()
    idx = torch.tensor([0, 1, 2, 4])
    g = torch.Generator().manual_seed(1)
    views = [torch.randn(4, 3, 8, 8, generator=g), torch.randn(4, 3, 8, 8, generator=g)]
    bank_before = method.bank.clone()
    out = run_step(method, Batch(views, labels[idx], idx, generator=torch.Generator().manual_seed(5)))
    # replay: the same draw from the same generator state
    neg_idx = method.sampler.sample(idx, labels[idx], 3, torch.Generator().manual_seed(5))
    assert (labels[neg_idx] != labels[idx][:, None]).all()
    with torch.no_grad():
        z = method.embed(torch.cat(views))
    ref = _reference(z.double(), labels[idx], bank_before[neg_idx].double(), 0.1)
    assert float(out["loss"].detach()) == pytest.approx(ref, rel=1e-4)
    # the bank entries of the batch moved to normalize(0.5 m + 0.5 normalize(z1 + z2)); the others did not
    new = F.normalize(0.5 * bank_before[idx] + 0.5 * F.normalize(z[:4] + z[4:], dim=1), dim=1)
    assert torch.allclose(method.bank[idx], new, atol=1e-5)
    rest = torch.tensor([i for i in range(12) if i not in idx.tolist()])
    assert torch.equal(method.bank[rest], bank_before[rest])


@pytest.mark.parametrize("mode", ["both", "extra", "distance"])
def test_latent_mixup_pseudo_negatives_and_view_distance_against_the_formula(mode):
    method, labels = _method(latent_mixup=True, lm_num_mixed=2, **({} if mode == "both" else {"lm_mode": mode}))
    assert method.cfg.method.lm_mode == mode
    idx = torch.tensor([0, 1, 5])
    g = torch.Generator().manual_seed(3)
    views = [torch.randn(3, 3, 8, 8, generator=g), torch.randn(3, 3, 8, 8, generator=g)]
    bank = method.bank.clone().double()
    out = run_step(method, Batch(views, labels[idx], idx, generator=torch.Generator().manual_seed(9)))
    replay = torch.Generator().manual_seed(9)  # negatives first, then one lambda per mixed pair
    neg_idx = method.sampler.sample(idx, labels[idx], 3, replay)
    lam = (torch.rand((3, 2), generator=replay) * 1.0).double()
    with torch.no_grad():
        z = method.embed(torch.cat(views)).double()

    def unit(v):
        return v / v.norm()

    negs = [[bank[int(j)] for j in neg_idx[a]] for a in range(3)]
    if mode != "distance":  # lam * (the image's own bank entry) + (1 - lam) * negative, as extra negatives
        negs = [row + [unit(lam[a, j] * bank[int(idx[a])] + (1 - lam[a, j]) * row[j]) for j in range(2)]
                for a, row in enumerate(negs)]
    ref = _reference(z, labels[idx], [torch.stack(r) for r in negs], 0.1)
    if mode != "extra":  # || n(lam z1 + (1 - lam) m) - n(lam z2 + (1 - lam) m) ||^2, mean over the pairs
        ref += sum(float((unit(lam[a, j] * z[a] + (1 - lam[a, j]) * negs[a][j])
                          - unit(lam[a, j] * z[3 + a] + (1 - lam[a, j]) * negs[a][j])).pow(2).sum())
                   for a in range(3) for j in range(2)) / 6
    assert float(out["loss"].detach()) == pytest.approx(ref, rel=1e-4, abs=1e-6)  # float32 step, float64 reference


def test_user_vectors_need_a_pin():
    with pytest.raises(Exception, match="needs 'method.vectors_sha256'"):
        _method("class", vectors="vectors", vectors_path="/nonexistent.txt")


def _pools_by_hand(features: torch.Tensor, labels: torch.Tensor, k: int) -> list[set[int]]:
    """Each image's k most cosine-similar other-class images, from the full similarity matrix (float64)."""
    f = F.normalize(features.double(), dim=1)
    s = f @ f.T
    out = []
    for i in range(len(labels)):
        cand = [(float(s[i, j]), j) for j in range(len(labels)) if labels[j] != labels[i]]
        out.append({j for _, j in sorted(cand, reverse=True)[:k]})
    return out


def test_instance_pools_come_from_the_teacher_runs_backbone(tmp_path):
    """scns_supcon_instance: the pools are the k nearest other-class images by the named run's backbone
    features of the un-augmented images; sampled negatives stay inside them."""
    from semcl.data import stats
    from semcl.data.views.build import build_augment
    from semcl.methods.base import Dependency
    from semcl.methods.scns_supcon.method import SCNSSupConInstance
    from semcl.models import build_backbone

    cfg = build_config({"data": {"name": "cifar10"}, "model": {"backbone": "resnet_tiny", "head_hidden": 16,
                                                               "head_dim": 4},
                        "method": {"name": "scns_supcon_instance", "num_negatives": 3, "k": 2}}, where="test")
    labels = torch.arange(12) % 3
    images = torch.randint(0, 256, (12, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    teacher = build_backbone("resnet_tiny", in_channels=3).eval()
    state = {f"backbone.{k}": v for k, v in teacher.state_dict().items()}
    dep = Dependency("teacher", "t0", tmp_path, lambda: state, dict, dict)
    method = SCNSSupConInstance(cfg, DataInfo(3, 3, None, torch.bincount(labels)))
    method.load_dependencies([dep])
    method.on_train_start(TrainContext(SimpleNamespace(labels=labels, images=images), [], torch.device("cpu"),
                                       tmp_path / "run", 0))
    mean, std = stats("cifar10")
    with torch.no_grad():
        feats = teacher(build_augment("test", size=32, mean=mean, std=std)(images, torch.Generator()))
    assert [set(p.tolist()) for p in method.sampler.pools] == _pools_by_hand(feats, labels, 2)
    saved = torch.load(tmp_path / "run" / "scns_negatives.pt", weights_only=True)
    assert torch.equal(saved["pools"], method.sampler.pools)
    idx = torch.tensor([0, 5, 7])
    neg = method.sampler.sample(idx, labels[idx], 3, torch.Generator().manual_seed(2))
    assert all(set(neg[r].tolist()) <= set(method.sampler.pools[i].tolist()) for r, i in enumerate(idx.tolist()))
    assert (labels[neg] != labels[idx][:, None]).all()


def test_instance_rows_build_on_their_similarity_network_run():
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    runs = {r.row_label: r for r in plan_runs(get_table("scns/sup-cifar10"), "paper") if r.seed == 123}
    for arch in ("resnet18_cifar", "resnet50_cifar"):
        ce = runs[f"Cross-entropy {arch} (similarity network)"]
        inst = runs[f"SCNS-instance {arch}"]
        assert inst.depends_on == (ce.run_id,) and ce.config.model.backbone == inst.config.model.backbone == arch
        assert inst.config.method.name == "scns_supcon_instance" and inst.config.method.k == 10
