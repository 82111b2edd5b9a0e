"""The preflight's fake-tensor memory (semcl.preflight.fake): the step's peak under fake tensors is the peak torch's
tracker sees on a real CPU run of the same step, the kNN mining's likewise, a row that cannot run faked falls back
to the formula and says why, and the report's lines."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed._tools.mem_tracker import MemTracker

from semcl.data.semantics.neighbours import knn_table
from semcl.methods.base import Batch, run_step
from semcl.preflight.check import CONTEXT_GB, _fake_estimate
from semcl.preflight.fake import knn_peak, mining_peak, step_peak, warm_optimizer
from semcl.preflight.live_bytes import LiveBytes
from semcl.preflight.report import RowCheck, render


class _Optim:
    amp = None


class _Cfg:
    optim = _Optim


class _Tiny(nn.Module):
    """A two-layer classifier with the Method calls the step makes (configure_optimizer, prepare, loss,
    after_backward) and a method name whose spec declares no kNN mining."""

    cfg = SimpleNamespace(method=SimpleNamespace(name="ce"))

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 10))
        self.frozen = nn.Linear(48, 48)  # a frozen module (a momentum encoder's place): no grad, no slots
        self.frozen.requires_grad_(False)

    def configure_optimizer(self, optim):
        return torch.optim.Adam(self.net.parameters(), lr=1e-3)

    def loss(self, batch: Batch) -> dict:
        with torch.no_grad():
            target = self.frozen(batch.views[0])
        return {"loss": F.cross_entropy(self.net(batch.views[0] + target), batch.labels)}

    def prepare(self, batch: Batch) -> Batch:
        return batch

    def after_backward(self) -> None:
        pass


class _ValueSteered(_Tiny):
    """A step whose Python branches on a tensor's value: fake tensors have none."""

    def loss(self, batch: Batch) -> dict:
        if batch.labels.max().item() > 5:
            return {"loss": self.net(batch.views[0]).sum()}
        return super().loss(batch)


def _batch(n: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    return Batch([torch.randn(n, 48, generator=g)], torch.randint(0, 10, (n,), generator=g), torch.arange(n))


def _real_peak(method: _Tiny, batch: Batch) -> int:
    """The same step as step_peak, on real CPU tensors, under the same tracker: as the engine's (Stepper), the
    previous step's gradients are freed after the forward."""
    opt = method.configure_optimizer(None)
    warm_optimizer(opt)
    for p in method.net.parameters():
        p.grad = torch.zeros_like(p)
    tracker = LiveBytes()
    tracker.track_external(method, opt)
    with tracker:
        x, y = batch.views[0].clone(), batch.labels.clone()  # the batch is allocated inside the step, as there
        loss = run_step(method, Batch([x], y, batch.indices))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return tracker.peak


def test_fake_step_peak_is_the_real_runs_peak():
    torch.manual_seed(0)
    method = _Tiny()
    fake = step_peak(method, _Cfg, _batch(4), 256)  # measured from a batch of 4, at 256
    real = _real_peak(_Tiny(), _batch(256))
    assert fake == real
    # the floor by hand: trainable weights, gradients, Adam's two slots (4 x 4 x 3786 parameters), the frozen
    # weights and the input [256, 48]
    params = 48 * 64 + 64 + 64 * 10 + 10
    assert fake >= 4 * 4 * params + 4 * (48 * 48 + 48) + 256 * 48 * 4
    # the step did not touch the real method
    assert all(not type(p).__name__.startswith("Fake") for p in method.parameters())


class _WeightDecayed(_Tiny):
    """SGD with momentum and weight decay, as every registered recipe but the ViT and video ones; `foreach`: its
    implementation (None: torch's pick by device)."""

    def __init__(self, foreach: bool | None = None) -> None:
        super().__init__()
        self.foreach = foreach

    def configure_optimizer(self, optim):
        return torch.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, foreach=self.foreach)


def test_the_fake_optimiser_step_is_cudas_multi_tensor_one():
    """On CUDA parameters torch's SGD takes its multi-tensor step, which makes the weight-decayed gradients as one
    new list (a whole copy of the gradients); on the CPU it loops per parameter, in place. At a batch of 1 the
    multi-tensor step is the peak: the fake step's peak is that step's, above the loop's (whose peak is the
    backward's), and at least weights, gradients, momentum, the decayed copy and the frozen weights."""
    torch.manual_seed(0)
    fake = step_peak(_WeightDecayed(), _Cfg, _batch(4), 1)

    assert fake == _real_peak(_WeightDecayed(foreach=True), _batch(1)) > _real_peak(_WeightDecayed(foreach=False),
                                                                                     _batch(1))
    assert fake >= 4 * 4 * (48 * 64 + 64 + 64 * 10 + 10) + 4 * (48 * 48 + 48)


def test_a_real_optimisers_state_gives_the_fake_step_the_same_peak_as_its_own_warm_step():
    """The fake step starts from fakes of the real optimiser's state after a step (a whole check's, or the memory
    check's real warm step) instead of a faked warm step; the peak is the same, and an optimiser without state for
    every trainable parameter (a fresh one) leaves the fake step to warm its own."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from semcl.preflight.fake import _state_from, fake_copy

    torch.manual_seed(0)
    method = _Tiny()
    own = step_peak(method, _Cfg, _batch(4), 256)
    opt = method.configure_optimizer(None)
    assert step_peak(method, _Cfg, _batch(4), 256, warm=opt) == own  # fresh: no state to take
    warm_optimizer(opt)
    assert step_peak(method, _Cfg, _batch(4), 256, warm=opt) == own == _real_peak(_Tiny(), _batch(256))
    # the state taken is fakes of the real slots, keyed by the fake parameters, the real ones untouched
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = fake_copy(method, mode, {})
    with mode:
        fake_opt = fake.configure_optimizer(None)
    assert _state_from(opt, fake_opt, dict(zip(method.parameters(), fake.parameters(), strict=True)), mode)
    for p, q in zip(method.net.parameters(), fake.net.parameters(), strict=True):
        got, want = fake_opt.state[q], opt.state[p]
        assert set(got) == set(want) and type(got["exp_avg"]).__name__ == "FakeTensor"
        assert all(got[k].shape == want[k].shape and got[k].dtype == want[k].dtype for k in want)
    other = torch.optim.Adam(_Tiny().net.parameters(), lr=1e-3)  # another model's optimiser: not taken
    warm_optimizer(other)
    assert not _state_from(other, fake_opt, dict(zip(method.parameters(), fake.parameters(), strict=True)), mode)


def _stock_peak(tracker: MemTracker) -> int:
    """The peak of torch's own MemTracker, as it reports it."""
    return int(max(s["Total"] for s in tracker.get_tracker_snapshot("peak").values()))


def test_the_live_bytes_counter_counts_what_torchs_memtracker_does():
    # one real Adam step of a classifier (no frozen weights: torch's tracker hooks every parameter's gradient)
    # under torch's MemTracker and under ours
    peaks = []
    for make, read in ((MemTracker, _stock_peak), (LiveBytes, lambda t: t.peak)):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        warm_optimizer(opt)
        tracker = make()
        tracker.track_external(net, opt)
        with tracker:
            batch = _batch(64)
            F.cross_entropy(net(batch.views[0].clone()), batch.labels).backward()
            opt.step()
        peaks.append(read(tracker))
    # the floor by hand: weights, gradients and Adam's two slots (4 x 4 x 3786 parameters) and the input [64, 48]
    assert peaks[0] == peaks[1] >= 4 * 4 * (48 * 64 + 64 + 64 * 10 + 10) + 64 * 48 * 4


def test_the_live_bytes_counter_counts_a_fake_conv_step_as_torchs_memtracker_does():
    """Under fake tensors, as the preflight counts: a conv net with batch norm under the bf16 autocast, backward and
    SGD's multi-tensor step (momentum and weight decay) at a batch of 32; the same peak from both counters, and
    more than the weights, gradients and momentum alone."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from semcl.preflight.fake import fake_copy

    peaks = []
    for make, read in ((MemTracker, _stock_peak), (lambda: LiveBytes(kind=FakeTensor), lambda t: t.peak)):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        mode = FakeTensorMode()
        fake = fake_copy(net, mode, {})
        with mode:
            opt = torch.optim.SGD(fake.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, foreach=True)
            warm_optimizer(opt)
        tracker = make()
        tracker.track_external(fake, opt)
        with mode, tracker:
            x, y = torch.empty(32, 3, 32, 32), torch.zeros(32, dtype=torch.long)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(fake(x), y)
            loss.backward()
            opt.step()
        peaks.append(read(tracker))
    weights = sum(p.numel() for p in net.parameters()) * 4
    assert peaks[0] == peaks[1] > 3 * weights + 32 * 16 * 32 * 32 * 2  # + the first conv's bf16 activations


def test_fake_knn_peak_is_the_real_searchs_peak():
    n, d, k = 700, 16, 5
    tracker = MemTracker()
    with tracker:
        knn_table(torch.randn(n, d), k, query_chunk=4096, key_chunk=65536)
    # features and their normalised copy, the [N, k] table, and the [N, N] block with its top-k: at least
    assert knn_peak(n, d, k) == _stock_peak(tracker)
    assert knn_peak(n, d, k) >= 2 * n * d * 4 + n * n * 4 + n * k * 8


def test_a_step_that_cannot_run_faked_falls_back_and_says_why():
    out = RowCheck("t", "r", "id", batch_per_gpu=64.0, gpus=8)
    method = _ValueSteered()
    _fake_estimate(out, method, _Cfg, method.configure_optimizer(None), _batch(4), 1000)
    assert out.fake_gpu_gb is None
    assert out.fake_note.startswith("fake step failed (DataDependentOutputException")
    ok = RowCheck("t", "r", "id", batch_per_gpu=64.0, gpus=8)
    _fake_estimate(ok, _Tiny(), _Cfg, None, _batch(4), 1000)
    assert ok.fake_note is None and ok.fake_gpu_gb > CONTEXT_GB and ok.mining_gpu_gb is None


class _Ranked(_Tiny):
    """A RINCE step: ranked InfoNCE over the batch's similarities, ranks from the labels (1: same class,
    2: same label parity, 0: negative). Its CPU path reads the ranks' range on the host."""

    def loss(self, batch: Batch) -> dict:
        from semcl.losses.ranked import ranked_info_nce

        z = F.normalize(self.net(batch.views[0]), dim=1)
        y = batch.labels
        ranks = torch.where(y[:, None] == y[None], 1, torch.where(y[:, None] % 2 == y[None] % 2, 2, 0))
        return {"loss": ranked_info_nce(z @ z.T, ranks, (0.1, 0.2), form="in")}


def test_a_step_that_reads_values_on_the_cpu_runs_faked_on_the_accelerators_path():
    """The ranked loss reads its ranks' range on the host only on the CPU; the fake step (a GPU's memory) takes the
    accelerator's read-free path, so it runs (all RINCE rows fell back to the formula before) and its peak is the
    real step's on that path."""
    from semcl.runtime.host_sync import like_an_accelerator

    torch.manual_seed(0)
    fake = step_peak(_Ranked(), _Cfg, _batch(4), 128)
    torch.manual_seed(0)
    with like_an_accelerator():
        real = _real_peak(_Ranked(), _batch(128))
    assert fake == real
    out = RowCheck("t", "r", "id", batch_per_gpu=128.0, gpus=1)
    method = _Ranked()
    _fake_estimate(out, method, _Cfg, method.configure_optimizer(None), _batch(4), 1000)
    assert out.fake_note is None and out.fake_gpu_gb == real / 2**30 + CONTEXT_GB


class _HostSampled(_Tiny):
    """A CRD-like step: K other-class negatives per anchor drawn on the host by CRD's sampler (its label values steer
    Python), their rows of a memory-bank buffer gathered and scored. `drawn`: each step's negatives (real values);
    `given`: negatives drawn before the step (the real comparison's host work, outside its tracker)."""

    def __init__(self, labels: torch.Tensor, k: int, given: torch.Tensor | None = None) -> None:
        super().__init__()
        from semcl.data.semantics.negatives import UniformNegatives

        self.train_labels, self.k, self.given, self.drawn = labels, k, given, []
        self.sampler = UniformNegatives(labels, 10)
        self.register_buffer("bank", F.normalize(torch.randn(len(labels), 10), dim=1))

    def draw(self, idx: torch.Tensor) -> torch.Tensor:
        return self.sampler.sample(idx, self.train_labels[idx], self.k, torch.Generator().manual_seed(0))

    def prepare(self, batch: Batch) -> tuple:
        idx = batch.indices.cpu()
        neg = self.draw(idx) if self.given is None else self.given
        self.drawn.append(neg)
        return batch, idx, neg

    def loss(self, inputs: tuple) -> dict:
        batch, idx, neg = inputs
        z = F.normalize(self.net(batch.views[0]), dim=1)
        scores = torch.einsum("bkd,bd->bk", self.bank[torch.cat([idx[:, None], neg], 1)], z)
        return {"loss": (torch.logsumexp(scores / 0.07, 1) - scores[:, 0] / 0.07).mean()}  # the positive: column 0


def test_a_step_that_samples_on_the_host_runs_faked_with_its_host_work_real():
    """CRD's negatives come from a sampler over the training labels (host work on a GPU too): `prepare` runs on the
    real method, outside fake mode, drawing the real step's negatives, and only `loss` runs on the fake copy; the
    peak is the real step's device work (the draw itself is host memory), the bank gather [B, K + 1, D] in it.
    Before, every CRD row fell back to the formula."""
    labels = torch.arange(300) % 10
    method = _HostSampled(labels, 50)
    fake = step_peak(method, _Cfg, _batch(4), 128)  # the fake step's indices: the batch's 4, repeated to 128
    idx = torch.arange(4).repeat(32)
    given = method.draw(idx)
    assert len(method.drawn) == 1 and torch.equal(method.drawn[0], given)  # real values, the real draw
    batch = _batch(128)
    real_method = _HostSampled(labels, 50, given)
    opt = real_method.configure_optimizer(None)
    warm_optimizer(opt)
    for p in real_method.net.parameters():
        p.grad = torch.zeros_like(p)
    tracker = LiveBytes()
    tracker.track_external(real_method, opt)
    with tracker:  # as _real_peak; the labels, which this step never reads, are not in the fake step's figure
        x = batch.views[0].clone()
        loss = run_step(real_method, Batch([x], batch.labels, idx))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    real = tracker.peak
    assert fake == real
    assert fake >= 128 * 51 * 10 * 4  # the gathered bank rows, float32
    out = RowCheck("t", "r", "id", batch_per_gpu=128.0, gpus=1)
    m2 = _HostSampled(labels, 50)
    _fake_estimate(out, m2, _Cfg, m2.configure_optimizer(None), _batch(4), 300)
    assert out.fake_note is None and out.fake_gpu_gb == real / 2**30 + CONTEXT_GB


def test_report_lines_name_the_memory_source():
    rows = [RowCheck("hsa/abl-k", "k=10", "a", params=30_000_000, trainable=25_000_000, act_bytes_per_sample=2**20 * 80,
                     batch_per_gpu=32, gpus=8, est_gpu_gb=23.4, gpu_mem_gb=40, fake_gpu_gb=23.4, mining_gpu_gb=23.4),
            RowCheck("hsa/abl-k", "k=20", "b", params=30_000_000, trainable=25_000_000, act_bytes_per_sample=2**20 * 80,
                     batch_per_gpu=32, gpus=8, est_gpu_gb=41.0, gpu_mem_gb=40,
                     fake_note="fake step failed (DataDependentOutputException: aten._local_scalar_dense.default)")]
    lines = render(rows).splitlines()
    assert lines[1] == ("hsa/abl-k                k=10                             ready       30.00M    80.0 MiB        32 "
                        "       23.4 / 40 GiB  memory: fake-tensor step at batch 32, kNN mining 23.4 GiB")
    assert lines[2] == ("hsa/abl-k                k=20                             TOO BIG     30.00M    80.0 MiB        32 "
                        "       41.0 / 40 GiB  memory: formula from the small real step; fake step failed "
                        "(DataDependentOutputException: aten._local_scalar_dense.default)")
    assert lines[3] == "# 2 row(s): 1 ready, 1 with an error or too big"


def _miner(backend: str):
    """A method that mines: D 16, k 5 (its spec's StandIn.mining)."""
    return SimpleNamespace(cfg=SimpleNamespace(method=SimpleNamespace(name=f"miner_{backend}")))


@pytest.fixture(autouse=True)
def _miner_specs(monkeypatch):
    from semcl.methods import registry
    from semcl.methods.spec import MethodSpec, StandIn

    for backend in ("faiss", "torch"):
        name = f"miner_{backend}"
        schema = type(name, (), {"name": name})
        monkeypatch.setitem(registry.METHODS, name, MethodSpec(
            name, schema, "torch.nn:Module", stand_in=StandIn(mining=f"{__name__}:_search_{backend}")))


def _search_faiss(method) -> tuple[int, int, str]:
    return 16, 5, "faiss"


def _search_torch(method) -> tuple[int, int, str]:
    return 16, 5, "torch"


def test_mining_peak_holds_the_features_of_every_image():
    n, resident = 100_000, 10_000
    # faiss searches on the CPU: on the GPU, the encoded shards and their concatenation, 2 x N x D float32
    assert mining_peak(_miner("faiss"), n, resident) == resident + 2 * n * 16 * 4
    # the torch search: features, normalised copy, the [N, k] table and one [N, 65536] block (N < 2 key blocks)
    got = mining_peak(_miner("torch"), n, resident)
    assert got == resident + knn_peak(n, 16, 5)
    assert got >= resident + 2 * n * 16 * 4 + n * 5 * 8 + 4096 * 65536 * 4
    assert mining_peak(_Tiny(), n, resident) is None


def test_a_fake_copy_fakes_every_tensor_and_keeps_parameters_ties_and_host_state():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from semcl.preflight.fake import fake_copy

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 4)
            self.frozen = torch.nn.Linear(4, 2)
            self.frozen.requires_grad_(False)
            self.tied = self.a.weight  # one Parameter under two names
            self.register_buffer("queue", torch.zeros(5, 4))
            self.loose = [torch.ones(2)]  # a tensor no module registers
            self.labels = torch.arange(3)  # host state: stays the real tensor

    net = Net()
    copy_ = fake_copy(net, FakeTensorMode(allow_non_fake_inputs=True), {id(net.labels): net.labels})
    for name, p in copy_.named_parameters():
        assert isinstance(p, FakeTensor) and isinstance(p, torch.nn.Parameter), name
        assert p.requires_grad == dict(net.named_parameters())[name].requires_grad
        assert p.shape == dict(net.named_parameters())[name].shape
    assert copy_.tied is copy_.a.weight and isinstance(copy_.queue, FakeTensor)
    assert isinstance(copy_.loose[0], FakeTensor) and copy_.labels is net.labels
    assert not any(isinstance(t, FakeTensor) for t in (*net.parameters(), *net.buffers()))  # the original is untouched
