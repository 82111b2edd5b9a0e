"""KD students against RepDistiller and the SCNS text (issue 24, items 2, 3, 4, 5, 8 and the KD minors):
AB's connectors, the online teacher, SCNS's InfoNCE with K capped at the instance pool, Latent Mixup's
distance form, CC / FT in RepDistiller's forms, FT's initialisation lr and the fresh main-stage optimiser.
References are float64 loops written from the formulas (RepDistiller @ b84f547 where it is the source)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from semcl.data import stats
from semcl.data.views.build import build_augment
from semcl.losses.distill import ConvRegressor, LinearEmbed
from semcl.methods.base import Batch, DataInfo, Dependency, TrainContext, run_step
from semcl.methods.distill import STUDENTS
from semcl.methods.distill.method import AB, CC, FT, KD, KDTeacher, SCNSInstance, ab_connector, ft_init_lr
from semcl.models.kd import build_kd_model, feature_shapes
from semcl.run_config import build_config

C, N, SIZE = 5, 20, 16
NAMES = ("apple", "pear", "truck", "bus", "orange")


def _cfg(method: str, student: str = "resnet8", lr: float = 0.05, **m):
    tree = {"data": {"name": "cifar100", "image_size": SIZE, "augment": "pad_crop"}, "model": {"backbone": student},
            "optim": {"lr": lr}, "method": {"name": method, **m}}
    return build_config(tree, where="test")


def _info(labels):
    return DataInfo(C, 3, None, torch.bincount(labels, minlength=C), NAMES)


def _student(cls, method: str, tmp, teacher: str = "resnet14", student: str = "resnet8", **m):
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (N, 3, SIZE, SIZE), dtype=torch.uint8, generator=g)
    labels = torch.arange(N) % C
    torch.manual_seed(7)
    t_net = KDTeacher(_cfg("kd_teacher", teacher_arch=teacher), _info(labels))
    state = {k: v.clone() for k, v in t_net.state_dict().items()}
    for k, v in state.items():  # non-trivial BN statistics: train-mode use would show
        if k.endswith("running_mean"):
            v.normal_(0, 0.1)
    torch.manual_seed(1)
    s = cls(_cfg(method, student=student, teacher_arch=teacher, **m), _info(labels))
    s.load_dependencies([Dependency("teacher", "t" * 12, tmp, lambda: state, dict, dict)])
    return s, state, SimpleNamespace(images=images, labels=labels)


def _augmented(s, train_set, idx, seed=5):
    """The student's training view: RepDistiller's pad-crop + flip, drawn from a generator."""
    mean, std = stats("cifar100")
    aug = build_augment("pad_crop", size=SIZE, mean=mean, std=std)
    return aug(train_set.images[idx], torch.Generator().manual_seed(seed))


def _batch(x, train_set, idx, epoch=0, step=0, gen_seed=3):
    return Batch([x], train_set.labels[idx], idx, epoch, step, torch.Generator().manual_seed(gen_seed))


# ---- item 2: AB connectors ---------------------------------------------------------------------------------
# RepDistiller models/util.py Connector: identity where (channels, height) agree, else ConvReg(use_relu=False).
AB_PAIRS = {  # (teacher, student): identity per zipped stage of feat[1:-1], from the stage shapes at 32 px
    ("wrn_40_2", "wrn_16_2"): [True] * 3, ("wrn_40_2", "wrn_40_1"): [False] * 3,
    ("resnet56", "resnet20"): [True] * 3, ("resnet110", "resnet20"): [True] * 3,
    ("resnet110", "resnet32"): [True] * 3, ("resnet32x4", "resnet8x4"): [True] * 3,
    ("vgg13", "vgg8"): [True] * 4, ("vgg13", "MobileNetV2"): [False] * 4, ("ResNet50", "MobileNetV2"): [False] * 4,
    ("ResNet50", "vgg8"): [False] * 4, ("resnet32x4", "ShuffleV1"): [False] * 3,
    ("resnet32x4", "ShuffleV2"): [False] * 3, ("wrn_40_2", "ShuffleV1"): [False] * 3,
}


# (channels, side) of feat[1:-1] at 32 px per network (RepDistiller's models; our zoo's feature_shapes agree,
# checked for the cheap ones below)
STAGES = {
    "wrn_40_2": [(32, 32), (64, 16), (128, 8)], "wrn_16_2": [(32, 32), (64, 16), (128, 8)],
    "wrn_40_1": [(16, 32), (32, 16), (64, 8)], "resnet56": [(16, 32), (32, 16), (64, 8)],
    "resnet110": [(16, 32), (32, 16), (64, 8)], "resnet20": [(16, 32), (32, 16), (64, 8)],
    "resnet32": [(16, 32), (32, 16), (64, 8)], "resnet32x4": [(64, 32), (128, 16), (256, 8)],
    "resnet8x4": [(64, 32), (128, 16), (256, 8)], "vgg13": [(128, 16), (256, 8), (512, 4), (512, 4)],
    "vgg8": [(128, 16), (256, 8), (512, 4), (512, 4)], "MobileNetV2": [(12, 16), (16, 8), (48, 4), (160, 2)],
    "ResNet50": [(256, 32), (512, 16), (1024, 8), (2048, 4)], "ShuffleV1": [(240, 16), (480, 8), (960, 4)],
    "ShuffleV2": [(116, 16), (232, 8), (464, 4)],
}


def test_ab_connector_is_the_identity_exactly_where_repdistiller_uses_one():
    for arch in ("resnet20", "vgg8"):
        got = feature_shapes(build_kd_model(arch, 100, 3), 32, 3)[1:-1]
        assert [(c, h) for c, h, _ in got] == STAGES[arch], arch
    for (t, s), expected in AB_PAIRS.items():
        g_s = [(1, c, h, h) for c, h in STAGES[s]]
        g_t = [(1, c, h, h) for c, h in STAGES[t]]
        conns = [ab_connector(a, b) for a, b in zip(g_s, g_t, strict=False)]
        assert [isinstance(c, nn.Identity) for c in conns] == expected, (t, s)
        assert all(isinstance(c, ConvRegressor) and not c.use_relu for c in conns if not isinstance(c, nn.Identity))
        if (t, s) == ("wrn_40_2", "wrn_40_1"):  # RepDistiller's ConvReg without ReLU: onto the teacher's map
            assert [tuple(c.eval()(torch.randn(2, *a[1:])).shape) for c, a in zip(conns, g_s, strict=True)] == \
                [(2, *b[1:]) for b in g_t]


def test_ab_method_builds_identity_connectors_for_a_matching_pair(tmp_path):
    s, _, _ = _student(AB, "ab", tmp_path, teacher="resnet14", student="resnet8")  # both 16/32/64 channels
    assert all(isinstance(c, nn.Identity) for c in s.connectors)
    assert not any(p.requires_grad for p in s.connectors.parameters())


# ---- item 3: the teacher runs online ------------------------------------------------------------------------
def test_every_student_defaults_to_the_online_teacher_and_it_equals_a_direct_forward(tmp_path):
    assert {spec.schema(teacher_arch="resnet8").teacher_outputs for spec in STUDENTS} == {"online"}
    s, state, train_set = _student(KD, "kd", tmp_path)
    s.on_train_start(TrainContext(train_set, [], torch.device("cpu"), None, 0))
    assert s.cache == {}  # no pass over un-augmented images
    idx = torch.tensor([0, 3, 6, 9, 12, 17])
    x = _augmented(s, train_set, idx)
    s.train()
    feats, logits = s.teacher_targets(_batch(x, train_set, idx))
    ref = build_kd_model("resnet14", C, 3)
    ref.load_state_dict({k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")})
    ref.eval()
    with torch.no_grad():
        feats_ref, logits_ref = ref.forward_features(x)
    assert torch.equal(logits, logits_ref)
    assert all(torch.equal(a, b) for a, b in zip(feats, feats_ref, strict=True))
    # and the KD term of the step reads exactly these targets (float64: T^2 KL(p_T || p_S) at T = 4)
    s.double()
    ref.double()
    out = run_step(s, _batch(x.double(), train_set, idx))
    with torch.no_grad():
        z_s, z_t = s.backbone(x.double()), ref(x.double())
    log_ps, log_pt = torch.log_softmax(z_s / 4, 1), torch.log_softmax(z_t / 4, 1)
    kd = 16 * (log_pt.exp() * (log_pt - log_ps)).sum(1).mean()
    assert out["kd"].item() == pytest.approx(kd.item(), rel=1e-12)


# ---- item 4: SCNS's InfoNCE with K capped at the instance pool ------------------------------------------------
def _unit(x):
    return x / x.pow(2).sum(-1, keepdim=True).sqrt()


def _infonce_ref(v_s, v_t, mem_s, mem_t, index, negs, T):
    """float64 loops: per side, -log softmax of the positive among [positive, K negatives], batch mean."""
    total = 0.0
    for v, bank in ((v_s, mem_t), (v_t, mem_s)):
        side = 0.0
        for b in range(v.shape[0]):
            ids = [int(index[b])] + [int(j) for j in negs[b]]
            logits = torch.stack([v[b] @ bank[j] for j in ids]) / T
            side += -(logits[0] - torch.logsumexp(logits, 0))
        total += side / v.shape[0]
    return total


def _scns_instance(tmp_path, **m):
    s, _, train_set = _student(SCNSInstance, "scns_instance", tmp_path, k=3, nce_k=16384, **m)
    s.on_train_start(TrainContext(train_set, [], torch.device("cpu"), tmp_path / "run", 0))
    s.double().train()
    return s, train_set


def test_scns_instance_draws_its_pool_once_and_scores_infonce_against_a_float64_reference(tmp_path):
    s, train_set = _scns_instance(tmp_path)
    assert s.cfg.method.objective == "infonce" and s.num_negatives() == 3
    idx = torch.tensor([1, 4, 8, 13, 19])
    x = _augmented(s, train_set, idx).double()
    negs = s.prepare(_batch(x, train_set, idx)).negatives
    assert negs.shape == (5, 3)  # K = 16,384 asked, the 3-image pool drawn once each (no repeats)
    for row, i in zip(negs, idx, strict=True):
        assert sorted(row.tolist()) == sorted(s.sampler.pools[i].tolist())
    feats_s, _ = s.backbone.forward_features(x)
    feats_t, _ = s.teacher_targets(_batch(x, train_set, idx))
    mem_s, mem_t = s.crd.memory.memory_s.clone(), s.crd.memory.memory_t.clone()
    loss = s.distill_loss(feats_s, feats_t, s.prepare(_batch(x, train_set, idx)))
    with torch.no_grad():
        v_s = _unit(feats_s[-1] @ s.crd.embed_s.linear.weight.T + s.crd.embed_s.linear.bias)
        v_t = _unit(feats_t[-1] @ s.crd.embed_t.linear.weight.T + s.crd.embed_t.linear.bias)
    ref = _infonce_ref(v_s, v_t, mem_s, mem_t, idx, negs, 0.07)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)
    assert '"negatives_per_anchor": 3' in (tmp_path / "run" / "scns_negatives.json").read_text()


# ---- item 5: Latent Mixup as a distance between the mixed representations -------------------------------------
def test_latent_mixup_distance_variant_is_the_mixed_representation_distance_against_a_float64_reference(tmp_path):
    s, train_set = _scns_instance(tmp_path, latent_mixup=True, lm_mode="distance")
    m = s.cfg.method
    assert (m.lm_mode, m.lm_weight, m.lm_lam_max) == ("distance", 1.0, 1.0)
    idx = torch.tensor([0, 2, 7, 11, 16, 18])
    x = _augmented(s, train_set, idx).double()
    feats_s, _ = s.backbone.forward_features(x)
    feats_t, _ = s.teacher_targets(_batch(x, train_set, idx))
    mem_s, mem_t = s.crd.memory.memory_s.clone(), s.crd.memory.memory_t.clone()
    loss = s.distill_loss(feats_s, feats_t, s.prepare(_batch(x, train_set, idx, gen_seed=11)))
    g = torch.Generator().manual_seed(11)  # the same stream: negatives first, then one lambda per pair
    negs = s.sampler.sample(idx, train_set.labels[idx], 3, g)
    lam = (torch.rand((6, 3), generator=g) * 1.0).double()
    with torch.no_grad():
        v_s = _unit(feats_s[-1] @ s.crd.embed_s.linear.weight.T + s.crd.embed_s.linear.bias)
        v_t = _unit(feats_t[-1] @ s.crd.embed_t.linear.weight.T + s.crd.embed_t.linear.bias)
    dist = 0.0
    for b in range(6):
        for j in range(3):
            zs = _unit(lam[b, j] * v_s[b] + (1 - lam[b, j]) * mem_s[negs[b, j]])  # mixed student representation
            zt = _unit(lam[b, j] * v_t[b] + (1 - lam[b, j]) * mem_t[negs[b, j]])  # mixed teacher representation
            dist += (zs - zt).pow(2).sum()
    ref = _infonce_ref(v_s, v_t, mem_s, mem_t, idx, negs, 0.07) + dist / 18 / m.beta  # weight 1 on beta * L
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)


def test_latent_mixup_default_makes_pseudo_negatives_and_minimises_their_distance_float64(tmp_path):
    """The paper's LM whole (SCNS §1): the same lambda mixes each side's bank positive with its negatives into
    pseudo-negatives that join the other side's anchor's negatives, and mixes each side's current embedding with
    the negatives for the distance term."""
    s, train_set = _scns_instance(tmp_path, latent_mixup=True)
    m = s.cfg.method
    assert (m.lm_mode, m.lm_weight, m.lm_lam_max) == ("both", 1.0, 1.0)
    idx = torch.tensor([0, 2, 7, 11, 16, 18])
    x = _augmented(s, train_set, idx).double()
    feats_s, _ = s.backbone.forward_features(x)
    feats_t, _ = s.teacher_targets(_batch(x, train_set, idx))
    mem_s, mem_t = s.crd.memory.memory_s.clone(), s.crd.memory.memory_t.clone()
    loss = s.distill_loss(feats_s, feats_t, s.prepare(_batch(x, train_set, idx, gen_seed=11)))
    g = torch.Generator().manual_seed(11)  # the same stream: negatives first, then one lambda per pair
    negs = s.sampler.sample(idx, train_set.labels[idx], 3, g)
    lam = (torch.rand((6, 3), generator=g) * 1.0).double()
    with torch.no_grad():
        v_s = _unit(feats_s[-1] @ s.crd.embed_s.linear.weight.T + s.crd.embed_s.linear.bias)
        v_t = _unit(feats_t[-1] @ s.crd.embed_t.linear.weight.T + s.crd.embed_t.linear.bias)
    T, total, dist = 0.07, 0.0, 0.0
    for v, bank in ((v_s, mem_t), (v_t, mem_s)):  # the student anchor scores the teacher bank and vice versa
        side = 0.0
        for b in range(6):
            i = int(idx[b])
            keys = [bank[i]] + [bank[int(j)] for j in negs[b]]
            keys += [_unit(lam[b, j] * bank[i] + (1 - lam[b, j]) * bank[int(negs[b, j])]) for j in range(3)]
            logits = torch.stack([v[b] @ k for k in keys]) / T
            side += -(logits[0] - torch.logsumexp(logits, 0))
        total += side / 6
    for b in range(6):
        for j in range(3):
            zs = _unit(lam[b, j] * v_s[b] + (1 - lam[b, j]) * mem_s[negs[b, j]])
            zt = _unit(lam[b, j] * v_t[b] + (1 - lam[b, j]) * mem_t[negs[b, j]])
            dist += (zs - zt).pow(2).sum()
    assert loss.item() == pytest.approx((total + dist / 18 / m.beta).item(), rel=1e-10)


# ---- item 8: CC and FT in RepDistiller's forms ------------------------------------------------------------
def test_cc_default_is_repdistillers_correlation_on_linear_embeddings(tmp_path):
    s, _, train_set = _student(CC, "cc", tmp_path)
    assert s.cfg.method.variant == "repdistiller"
    assert isinstance(s.embed_s, LinearEmbed) and isinstance(s.embed_t, LinearEmbed)
    s.double()
    g = torch.Generator().manual_seed(2)
    h_s, h_t = torch.randn(6, 64, generator=g, dtype=torch.float64), torch.randn(6, 64, generator=g, dtype=torch.float64)
    loss = s.distill_loss([h_s], [h_t], None)
    f_s = h_s @ s.embed_s.linear.weight.T + s.embed_s.linear.bias  # no normalisation (LinearEmbed)
    f_t = h_t @ s.embed_t.linear.weight.T + s.embed_t.linear.bias
    ref = 0.0
    for i in range(5):  # distiller_zoo/CC.py: mean over i of sum_d |f_s - f_t|_i,d |f_s - f_t|_i+1,d
        ref += sum(abs(f_s[i, d] - f_t[i, d]) * abs(f_s[i + 1, d] - f_t[i + 1, d]) for d in range(128))
    assert loss.item() == pytest.approx((ref / 5).item(), rel=1e-10)
    paper, _, _ = _student(CC, "cc", tmp_path, variant="paper")
    assert not isinstance(paper.embed_s, LinearEmbed)


def test_ft_default_is_repdistillers_factor_transfer(tmp_path):
    s, _, _ = _student(FT, "ft", tmp_path)
    assert s.cfg.method.variant == "repdistiller"
    s.double()
    g = torch.Generator().manual_seed(4)
    f_s = torch.randn(3, 64, 4, 4, generator=g, dtype=torch.float64)
    f_t = torch.randn(3, 64, 4, 4, generator=g, dtype=torch.float64)
    loss = s.distill_loss([None, f_s, None], [None, f_t, None], None)
    with torch.no_grad():
        fac_s, fac_t = s.translator(f_s), s.paraphraser.encoder(f_t)

    def factor(f):  # distiller_zoo/FT.py: normalize(mean_c f^2), p1 = 2
        a = f.pow(2).mean(1).flatten(1)
        return a / a.pow(2).sum(1, keepdim=True).sqrt()

    ref = (factor(fac_s) - factor(fac_t)).abs().mean()  # p2 = 1
    assert loss.item() == pytest.approx(ref.item(), rel=1e-10)


# ---- KD minors: FT's initialisation lr, a fresh optimiser for the main stage ----------------------------------
def test_ft_initialisation_lr_follows_repdistiller_per_student():
    assert ft_init_lr(_cfg("ft", "resnet8", 0.05, teacher_arch="resnet14")) == 0.01
    assert ft_init_lr(_cfg("ft", "wrn_16_2", 0.05, teacher_arch="wrn_40_2")) == 0.01
    assert ft_init_lr(_cfg("ft", "vgg8", 0.05, teacher_arch="vgg13")) == 0.05
    assert ft_init_lr(_cfg("ft", "MobileNetV2", 0.01, teacher_arch="vgg13")) == 0.01
    assert ft_init_lr(_cfg("ft", "resnet8", 0.05, teacher_arch="resnet14", init_lr=0.05)) == 0.05


def test_ft_paraphraser_trains_at_the_init_lr_and_the_main_stage_starts_a_fresh_optimizer(tmp_path):
    s, _, train_set = _student(FT, "ft", tmp_path, init_epochs=1)
    opt = s.configure_optimizer(s.cfg.optim)
    scale = {id(p): g.get("lr_scale", 1.0) for g in opt.param_groups for p in g["params"]}
    assert all(scale[id(p)] * 0.05 == pytest.approx(0.01) for p in s.paraphraser.parameters())
    assert {scale[id(p)] for p in s.backbone.parameters()} == {1.0}
    a, _, _ = _student(AB, "ab", tmp_path, init_epochs=1)
    opt = a.configure_optimizer(a.cfg.optim)
    a.train()
    idx = torch.arange(8)
    x = _augmented(a, train_set, idx)
    for epoch, step in ((0, 0), (0, 1), (1, 0), (1, 1)):
        had = len(opt.state)
        opt.zero_grad(set_to_none=True)
        run_step(a, _batch(x, train_set, idx, epoch=epoch, step=step))["loss"].backward()
        # cleared at the main stage's first step only (a resume inside epoch 1 keeps its own momentum)
        assert len(opt.state) == (0 if (epoch, step) == (1, 0) else had), (epoch, step)
        opt.step()


def test_main_stage_momentum_equals_a_fresh_sgd(tmp_path):
    a, _, train_set = _student(AB, "ab", tmp_path, init_epochs=1)
    opt = a.configure_optimizer(a.cfg.optim)
    a.train()
    idx = torch.arange(8)
    x = _augmented(a, train_set, idx)
    for step in range(2):  # the initialisation stage: momentum builds up
        opt.zero_grad(set_to_none=True)
        run_step(a, _batch(x, train_set, idx, epoch=0, step=step))["loss"].backward()
        opt.step()
    p = next(a.backbone.parameters())  # the stem conv: trained in both stages
    assert p in opt.state
    opt.zero_grad(set_to_none=True)
    run_step(a, _batch(x, train_set, idx, epoch=1, step=0))["loss"].backward()
    # SGD's own weight-decay add (one rounding, as its kernel does at any thread count)
    grad = torch.add(p.grad, p.detach(), alpha=a.cfg.optim.weight_decay)
    opt.step()
    torch.testing.assert_close(opt.state[p]["momentum_buffer"], grad, rtol=0, atol=0)


def test_kd_tables_plan_the_repdistiller_defaults_and_the_named_variants():
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    rows = {r.row_label: r.config.method for r in plan_runs(get_table("scns/kd-cifar100"), "paper") if r.seed == 123}
    assert rows["CC resnet32x4 to resnet8x4"].variant == "repdistiller"
    assert rows["FT resnet32x4 to resnet8x4"].variant == "repdistiller"
    assert rows["PKT resnet32x4 to resnet8x4"].variant == "repdistiller"
    cached = {label for label, m in rows.items() if getattr(m, "teacher_outputs", None) == "cached"}
    assert cached == {f"{x} resnet32x4 to resnet8x4 (teacher outputs cached)" for x in ("KD", "CRD", "SCNS-class")}
    paper = {label for label, m in rows.items() if getattr(m, "variant", None) == "paper"}
    assert paper == {f"{x} resnet32x4 to resnet8x4 (paper form)" for x in ("CC", "PKT", "FT")}
    students = {label: m for label, m in rows.items() if hasattr(m, "teacher_outputs")}
    assert all(m.teacher_outputs == "online" for label, m in students.items() if "cached" not in label)
    scns = [m for label, m in rows.items() if m.name.startswith("scns")]
    assert {m.objective for m in scns} == {"infonce"} and {m.lm_mode for m in scns if m.latent_mixup} == {"both"}


def test_scns_students_refuse_a_k_their_dataset_cannot_serve():
    from semcl.errors import ConfigError
    from semcl.methods.registry import METHODS
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    spec = METHODS["scns_class"]
    spec.check_dataset(_cfg("scns_class", teacher_arch="resnet14", k=9).method, 10)  # 9 other classes: fine
    with pytest.raises(ConfigError, match=r"'method.k' = 10: SCNS-class needs 1 <= k <= 9"):
        spec.check_dataset(_cfg("scns_class", teacher_arch="resnet14", k=10).method, 10)
    with pytest.raises(ConfigError, match="at least 2 classes"):
        METHODS["scns_instance"].check_dataset(_cfg("scns_instance", teacher_arch="resnet14").method, 1)
    ks = {r.row_label: r.config.method.k for r in plan_runs(get_table("scns/abl-k"), "mini") if r.seed == 123
          and r.config.method.name == "scns_class"}
    assert ks == {"SCNS-class k=1": 1, "SCNS-class k=5": 5, "SCNS-class k=10": 9, "SCNS-class k=20": 9,
                  "SCNS-class k=50": 9}


def test_the_old_ab_and_two_stage_behaviours_are_named_variants_with_their_own_run_ids(tmp_path):
    from semcl.registry.plan import make_run_id

    conv, _, train_set = _student(AB, "ab", tmp_path, connector="conv", main_stage_optimizer="carried", init_epochs=1)
    assert all(isinstance(c, ConvRegressor) for c in conv.connectors)
    opt = conv.configure_optimizer(conv.cfg.optim)
    conv.train()
    x = _augmented(conv, train_set, torch.arange(8))
    opt.zero_grad(set_to_none=True)
    run_step(conv, _batch(x, train_set, torch.arange(8), epoch=0, step=0))["loss"].backward()
    opt.step()
    built = len(opt.state)
    assert built > 0
    opt.zero_grad(set_to_none=True)  # carried: the initialisation's momentum survives the main stage's first step
    run_step(conv, _batch(x, train_set, torch.arange(8), epoch=1, step=0))["loss"].backward()
    assert len(opt.state) == built
    ids = {make_run_id(_cfg("ab", teacher_arch="resnet14", **kw), 1) for kw in
           ({}, {"connector": "conv"}, {"main_stage_optimizer": "carried"})}
    assert len(ids) == 3
