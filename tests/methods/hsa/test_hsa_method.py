"""The HSA / MoCo v2 method: reduction to MoCo v2's InfoNCE, the kNN table (mining, checkpoint, refresh
schedule) and one tiny table end to end through the CLI."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from semcl.data import stats
from semcl.data.semantics.neighbours import draw_neighbours
from semcl.data.views.build import build_augment
from semcl.methods.base import Batch, DataInfo, TrainContext, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

REPO = Path(__file__).resolve().parents[3]
N, SIZE, B, TAU = 24, 12, 6, 0.2
MEAN, STD = stats("fashion_mnist")


def _method(name: str = "hsa", **knobs):
    cfg = build_config({"method": {"name": name, "queue_size": 16, **knobs},
                        "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4},
                        "data": {"name": "fashion_mnist"}}, where="test")
    torch.manual_seed(0)
    return method_class(name)(cfg, DataInfo(3, 1, None))


def _images(n: int = N) -> torch.Tensor:
    return torch.randint(0, 256, (n, 1, SIZE, SIZE), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))


def _start(m, images: torch.Tensor, dtype=torch.float32, shapes_only: bool = False):
    aug = build_augment("supcon", size=SIZE, mean=MEAN, std=STD)
    ctx = TrainContext(SimpleNamespace(images=images, labels=torch.zeros(len(images), dtype=torch.long)),
                       [lambda x, g: aug(x, g).to(dtype)], torch.device("cpu"), None, 0, shapes_only=shapes_only)
    m.on_train_start(ctx)
    return ctx


def _batch(ctx, epoch: int = 0, seed: int = 7) -> Batch:
    g = torch.Generator().manual_seed(seed)
    idx = torch.arange(2, 2 + B)
    views = [ctx.augment[0](ctx.train_set.images[idx], g) for _ in range(2)]
    return Batch(views, torch.zeros(B, dtype=torch.long), idx, epoch, 0, g)


def _nce(q, k, queue):
    """-log( e^{q.k/tau} / (e^{q.k/tau} + sum_i e^{q.n_i/tau}) ), batch mean, written out."""
    pos = (q * k).sum(1) / TAU
    neg = q @ queue.T / TAU
    return (-pos + torch.logsumexp(torch.cat([pos[:, None], neg], 1), dim=1)).mean()


def test_mocov2_step_is_infonce_by_hand():
    m = _method("mocov2").double()
    ctx = _start(m, _images(), torch.float64)
    batch = _batch(ctx)
    queue = m.bank.features.clone()
    loss = run_step(m, batch)["loss"]
    assert m.neighbours is None and not m.stages
    with torch.no_grad():  # the key encoder after this step's EMA step (= the copy at step 0)
        q = F.normalize(m.head.net(m.backbone(batch.views[0])), dim=1)
        k = F.normalize(m.key_head.net(m.key_backbone(batch.views[1])), dim=1)
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss.detach(), _nce(q, k, queue), rtol=1e-12, atol=1e-12)
    loss.backward()
    m.after_backward()
    assert torch.equal(m.bank.features[:B], k) and int(m.bank.ptr) == B
    assert m.bank.labels[:B].tolist() == [0] * B  # labels unused: 0, never -1 (MemoryBank.filled)


def test_hsa_with_neighbour_weight_zero_is_mocov2_over_anchors_and_neighbours():
    m = _method("hsa", k=3, own_weight=1.0, neighbour_weight=0.0, cutmix=False, companions=False).double()
    ctx = _start(m, _images(), torch.float64)
    m.on_epoch_start(0)
    batch = _batch(ctx)
    g = torch.Generator()
    g.set_state(batch.generator.get_state())  # replay the method's draws: neighbour picks, their two views
    queue = m.bank.features.clone()
    out = run_step(m, batch)
    picked = draw_neighbours(m.neighbours.table, g, batch.indices)
    nb = ctx.train_set.images[picked]
    view_q, view_k = ctx.augment[0](nb, g), ctx.augment[0](nb, g)
    with torch.no_grad():
        def q(x):
            return F.normalize(m.head.net(m.backbone(x)), dim=1)

        def k(x):
            return F.normalize(m.key_head.net(m.key_backbone(x)), dim=1)
        want_a = _nce(q(batch.views[0]), k(batch.views[1]), queue)
        want_p = _nce(q(view_q), k(view_k), queue)
    torch.testing.assert_close(out["loss_anchor"], want_a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss_neighbour"], want_p, rtol=1e-12, atol=1e-12)
    # the default divides by its terms (the official / 3; two terms here without CutMix)
    torch.testing.assert_close(out["loss"].detach(), (want_a + want_p) / 2, rtol=1e-12, atol=1e-12)
    assert "loss_mix" not in out


def test_byol_rows_regress_the_predicted_query_onto_the_target_key():
    """loss_form byol without neighbours: 2 - 2 cos(predictor(head.net(f(x_1))), key(x_2)), batch mean."""
    m = _method("hsa", loss_form="byol", neighbours=False, cutmix=False, companions=False).double()
    ctx = _start(m, _images(), torch.float64)
    batch = _batch(ctx)
    loss = run_step(m, batch)["loss"]
    with torch.no_grad():
        p = F.normalize(m.predictor(m.head.net(m.backbone(batch.views[0]))), dim=1)
        k = F.normalize(m.key_head.net(m.key_backbone(batch.views[1])), dim=1)
    torch.testing.assert_close(loss.detach(), (2 - 2 * (p * k).sum(1)).mean(), rtol=1e-12, atol=1e-12)
    loss.backward()
    assert m.predictor[0].weight.grad is not None and m.key_head.net[0].weight.grad is None
    from semcl.errors import ConfigError

    with pytest.raises(ConfigError, match="companion losses on BYOL"):
        _method("hsa", loss_form="byol", companions=True)


def test_more_positives_draws_distinct_neighbours_each_its_own_term():
    """method.positives 2: two distinct neighbours per anchor, each through its own query / key passes."""
    m = _method("hsa", k=3, positives=2, own_weight=1.0, neighbour_weight=0.0, cutmix=False, companions=False).double()
    ctx = _start(m, _images(), torch.float64)
    m.on_epoch_start(0)
    batch = _batch(ctx)
    g = torch.Generator()
    g.set_state(batch.generator.get_state())
    queue = m.bank.features.clone()
    out = run_step(m, batch)
    rows = m.neighbours.table[batch.indices]
    picked = rows.gather(1, torch.rand(rows.shape, generator=g).argsort(dim=1)[:, :2])
    assert (picked[:, 0] != picked[:, 1]).all()
    with torch.no_grad():
        def q(x):
            return F.normalize(m.head.net(m.backbone(x)), dim=1)

        def k(x):
            return F.normalize(m.key_head.net(m.key_backbone(x)), dim=1)
        want = [_nce(q(batch.views[0]), k(batch.views[1]), queue)]
        for j in range(2):
            nb = ctx.train_set.images[picked[:, j]]
            view_q, view_k = ctx.augment[0](nb, g), ctx.augment[0](nb, g)
            want.append(_nce(q(view_q), k(view_k), queue))
    torch.testing.assert_close(out["loss_anchor"], want[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss_neighbour1"], want[2], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["loss"].detach(), sum(want) / 3, rtol=1e-12, atol=1e-12)  # mean: / (1 + 2m)
    from semcl.errors import ConfigError

    with pytest.raises(ConfigError, match="'method.positives' = 4 must be in \\[1, method.k = 3\\]"):
        _method("hsa", k=3, positives=4)


@pytest.mark.parametrize("features", ["query", "key"])
def test_mined_table_is_the_brute_force_cosine_knn_without_self(features):
    m = _method("hsa", k=4, features=features, mining_batch=5)  # chunks of 5: 24 = 4 x 5 + 4
    with torch.no_grad():
        for p in m.key_backbone.parameters():  # key encoder != query encoder, so the choice shows
            p.add_(0.3 * torch.randn_like(p))
    ctx = _start(m, _images())
    m.on_epoch_start(0)
    enc = (m.backbone if features == "query" else m.key_backbone).eval()
    x = build_augment("test", size=SIZE, mean=MEAN, std=STD)(_images(), torch.Generator())
    with torch.no_grad():
        v = F.normalize(enc(x).double(), dim=1)
    sim = (v @ v.T).fill_diagonal_(-float("inf"))
    table = m.neighbours.table
    assert table.shape == (N, 4) and not (table == torch.arange(N)[:, None]).any()
    assert torch.equal(table, sim.topk(4, dim=1).indices)
    assert ctx.train_set.images.shape[0] == N


def test_table_is_in_state_dict_and_a_resumed_method_uses_it():
    a = _method("hsa", k=3)
    ctx = _start(a, _images())
    a.on_epoch_start(0)
    state = copy.deepcopy(a.state_dict())
    assert torch.equal(state["neighbours.table"], a.neighbours.table) and int(state["neighbours.epoch"]) == 0

    b = _method("hsa", k=3)
    assert b.neighbours.table.shape == (0, 3)
    b.load_state_dict(state)
    _start(b, _images())
    b.mine = lambda epoch: pytest.fail(f"resumed method re-mined at epoch {epoch}")
    b.on_epoch_start(0)  # resumed inside epoch 0: the checkpoint's table stands
    b.on_epoch_start(3)
    assert torch.equal(b.neighbours.table, a.neighbours.table)
    # same state, same batch stream -> the same neighbours drawn and the same loss
    la, lb = run_step(a, _batch(ctx))["loss"], run_step(b, _batch(ctx))["loss"]
    torch.testing.assert_close(la, lb, rtol=0, atol=0)

    with pytest.raises(ValueError, match="kNN table has 24 rows but the training set has 20"):
        _start(b, _images(20))


def test_neighbours_refresh_exactly_every_refresh_epochs():
    m = _method("hsa", k=2, refresh=3)
    _start(m, _images())
    mined, real = [], m.mine

    def spy(epoch):
        mined.append(epoch)
        real(epoch)
    m.mine = spy
    for epoch in range(10):
        m.on_epoch_start(epoch)
        assert int(m.neighbours.epoch) == epoch - epoch % 3
    assert mined == [0, 3, 6, 9]


def test_variants_fill_unset_knobs_and_paper_is_default():
    paper, code = _method("hsa").knobs, _method("hsa", variant="code").knobs
    assert (paper.k, paper.features, paper.cutmix_alpha, paper.reduction, paper.warmup_epochs, paper.companions) == \
        (10, "query", 1.0, "mean", 11, True)  # the paper's components at the official loss scale and warm-up
    assert (code.k, code.features, code.cutmix_alpha, code.reduction, code.warmup_epochs, code.companions) == \
        (5, "key", 2.0, "mean", 11, False)
    assert _method("hsa", variant="code", k=7).knobs.k == 7


TINY = """\
id: hsa/tiny
paper: hsa
source: "test"
title: tiny HSA ablation
seeds: [123]
columns:
  - {key: top1, label: "Top-1", eval: linear_probe}
rows:
  - {label: MoCo v2, method: mocov2}
  - {label: HSA, method: hsa, overrides: {method.k: 3, method.stages: [layer1, layer2]}}
profiles:
  smoke:
    overrides:
      data.name: fashion_mnist
      data.synthetic: true
      data.synthetic_train_per_class: 4
      data.synthetic_test_per_class: 2
      model.backbone: resnet_tiny
      model.head_hidden: 16
      model.head_dim: 8
      optim.batch_size: 20
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 2
      method.queue_size: 64
      method.refresh: 1
      probe.epochs: 1
      probe.milestones: [1]
      probe.batch_size: 40
"""


def test_tiny_table_end_to_end_through_the_cli(registry_copy, tmp_path):
    (registry_copy / "test").mkdir()
    (registry_copy / "test" / "tiny.yaml").write_text(TINY)
    env = {**os.environ, "SEMCL_REGISTRY": str(registry_copy), "OMP_NUM_THREADS": "1"}

    def semcl(*args):
        res = subprocess.run([sys.executable, "-m", "semcl.cli", "--results", str(tmp_path / "res"), *args],
                             capture_output=True, text=True, env=env, cwd=REPO)
        assert res.returncode == 0, res.stderr
        return res.stdout

    semcl("run", "hsa/tiny", "--profile", "smoke", "--executor", "debug")
    records = [json.loads(p.read_text()) for p in (tmp_path / "res").rglob("metrics.json")]
    assert sorted(r["config"]["method"]["name"] for r in records) == ["hsa", "mocov2"]
    for r in records:
        assert 0.0 <= r["metrics"]["linear_top1_last"] <= 100.0 and len(r["history"]) == 2
    hsa_ckpt = next(p for p in (tmp_path / "res").rglob("last.pt")
                    if "neighbours.table" in torch.load(p, weights_only=False)["method"])
    state = torch.load(hsa_ckpt, weights_only=False)["method"]
    table = state["neighbours.table"]
    assert table.shape == (40, 3) and not (table == torch.arange(40)[:, None]).any()
    assert int(state["neighbours.epoch"]) == 1  # refresh 1: mined again on the second epoch
    printed = semcl("table", "hsa/tiny", "--profile", "smoke")
    assert "MoCo v2" in printed and "HSA" in printed


@pytest.mark.parametrize("branch", ["bottleneck", "mlp"])
def test_companion_keys_enter_their_own_stage_queue(branch):
    from semcl.models.stages import stage_outputs

    m = _method("hsa", k=3, stages=["layer2", "layer3"], stage_branch=branch)
    ctx = _start(m, _images())
    m.on_epoch_start(0)
    batch = _batch(ctx)
    out = run_step(m, batch)
    assert set(out) >= {"loss_layer2", "loss_layer3", "loss_mix"}
    has_block = any(type(x).__name__ == "Bottleneck" for x in m.stage_heads["layer2"].modules())
    assert has_block == (branch == "bottleneck")
    out["loss"].backward()
    m.after_backward()
    with torch.no_grad():
        maps = stage_outputs(m.key_backbone, batch.views[1])
        for s in ("layer2", "layer3"):
            torch.testing.assert_close(m.stage_banks[s].features[:B], m.key_stage_heads[s](maps[s]))
            assert int(m.stage_banks[s].ptr) == B
    assert "backbone.conv1.weight" in m.state_dict() and not any(k.startswith("backbone.") and "stage" in k
                                                                  for k in m.state_dict())


def test_cutmix_box_comes_from_the_rank_generator_under_ddp(monkeypatch):
    """One process: the box is drawn from the epoch's generator (as before); with a rank generator (several
    ranks) from that one, and the epoch's generator -- the same stream on every rank -- draws nothing for it."""
    import semcl.methods.hsa.method as hsa_method
    from semcl.data.views.cutmix import cutmix, draw_cut

    seen = []
    monkeypatch.setattr(hsa_method, "draw_cut", lambda b, h, w, g, **kw: (seen.append(g), draw_cut(b, h, w, g, **kw))[1])
    m = _method(k=3, companions=False, warmup_epochs=0)
    ctx = _start(m, _images())
    m.on_epoch_start(0)
    single = _batch(ctx)
    run_step(m, single)
    assert seen == [single.generator]
    ranked = _batch(ctx)
    before = ranked.generator.get_state()
    ranked.rank_generator = torch.Generator().manual_seed(1)
    run_step(m, ranked)
    assert seen[1] is ranked.rank_generator
    replay = torch.Generator()
    replay.set_state(before)  # the epoch's draws of the step: the neighbours and their two views only
    nb = ctx.train_set.images[draw_neighbours(m.neighbours.table, replay, ranked.indices)]
    ctx.augment[0](nb, replay), ctx.augment[0](nb, replay)
    assert torch.equal(ranked.generator.get_state(), replay.get_state())
    own = torch.Generator().manual_seed(1)
    cutmix(ranked.views[0], ranked.views[0], own, alpha=1.0)  # one box: the Beta seed and its centre
    assert torch.equal(ranked.rank_generator.get_state(), own.get_state())


def test_a_shapes_only_mining_encodes_two_images_and_repeats_them():
    """The preflight's memory check (TrainContext.shapes_only) needs the kNN table's shape, not its neighbours: the
    mining encodes SHAPES_ONLY_IMAGES training images, and their features stand for every image's in turn."""
    from semcl.methods.base import SHAPES_ONLY_IMAGES

    images = _images()
    full = _method()
    _start(full, images)
    every = full.mining_features()
    quick = _method()
    _start(quick, images, shapes_only=True)
    encoded: list[int] = []
    real = quick._encoded
    quick._encoded = lambda x: encoded.append(len(x)) or real(x)
    repeated = quick.mining_features()
    assert encoded == [SHAPES_ONLY_IMAGES] and repeated.shape == every.shape == (N, every.shape[1])
    expected = every[torch.arange(N) % SHAPES_ONLY_IMAGES]  # image i stands in as image i mod 2
    torch.testing.assert_close(repeated, expected, rtol=1e-5, atol=1e-5)
    quick.on_epoch_start(0)
    assert quick.neighbours.table.shape == (N, quick.knobs.k)


def test_only_a_run_with_knn_positives_declares_a_mining_search():
    """The preflight's mining memory figure (semcl.preflight.fake.mining_search) is asked of the spec: HSA with kNN
    positives searches D x k over every image at each refresh; MoCo v2 and HSA without neighbours never mine."""
    from semcl.preflight.fake import mining_search

    hsa = _method("hsa", k=4)
    assert mining_search(hsa) == (hsa.backbone.out_dim, 4, "torch")
    assert mining_search(_method("hsa", k=4, neighbours=False, cutmix=False)) is None
    assert mining_search(_method("mocov2")) is None
