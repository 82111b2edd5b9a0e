"""Issue 27, items 2-6: data pickles and checkpoints that cannot run code, code snapshots that
concurrent submissions cannot tear, a run finished while another process waited for its lock,
and a lock whose owner is a zombie."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from semcl import snapshot
from semcl.data import ensure_synthetic, load
from semcl.data.safe_pickle import load_npy, load_pickle, loads
from semcl.data.semantics.name_similarity import load_similarity
from semcl.errors import DataError, ResultsError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.runtime import runlock
from semcl.store import Store


class _System:
    """Unpickles as os.system(cmd): the crafted payload."""

    def __init__(self, cmd: str):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


# ---------------------------------------------------------------- 2. data pickles

def _reference(path: Path):
    with open(path, "rb") as f:
        return pickle.load(f, encoding="latin1")


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory) -> Path:
    return ensure_synthetic(tmp_path_factory.mktemp("synthetic"), ["cifar10", "cifar100"],
                            train_per_class=2, test_per_class=1)


def test_synthetic_cifar_files_load_as_pickle_loads_them(synthetic_root):
    files = sorted(p for d in ("cifar-10-batches-py", "cifar-100-python") for p in (synthetic_root / d).iterdir())
    assert len(files) == 7 + 3
    for path in files:
        assert _same(load_pickle(path), _reference(path)), path
    train = load("cifar10", synthetic_root, "train")
    assert train.images.shape == (20, 3, 32, 32)
    ref = np.concatenate([_reference(synthetic_root / "cifar-10-batches-py" / f"data_batch_{b}")["data"]
                          for b in range(1, 6)])
    assert torch.equal(train.images, torch.from_numpy(ref.reshape(-1, 3, 32, 32)))
    assert load("cifar100", synthetic_root, "test").labels.shape == (100,)


def test_every_protocol_and_the_python2_numpy_names_load():
    obj = {"data": np.arange(6, dtype=np.uint8).reshape(2, 3), "labels": [1, np.int64(2)], "names": ["a", b"b\xff"],
           "f": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "t": (1, None, True, 2.5)}
    for protocol in range(2, 6):
        assert _same(loads(pickle.dumps(obj, protocol=protocol)), obj)
    # the official files were pickled under numpy 1 (numpy.core.multiarray), ours under numpy 2 (numpy._core)
    old = pickle.dumps(obj, protocol=2).replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"cnumpy.core.multiarray\n_reconstruct" in old
    assert _same(loads(old), obj)


def test_a_python2_batch_loads(tmp_path):
    """A batch as Python 2's cPickle wrote the official files (protocol 2, numpy 1 names, byte strings
    as SHORT_BINSTRING, the array's raw bytes a str), assembled opcode by opcode."""
    raw = bytes([0, 1, 2, 200, 254, 255])
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01b\x87R"  # _reconstruct(ndarray, (0,), 'b')
             b"(K\x01K\x02K\x03\x86cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R"  # state: 1, (2, 3), dtype('u1', 0, 1)
             b"(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89U\x06" + raw + b"tb")
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02}(U\x04data" + array + b"U\x06labels](K\x01K\x00eU\x0bbatch_labelU\x03b 1u.")
    got = load_pickle(path)
    assert _same(got, _reference(path))
    assert got["data"].dtype == np.uint8 and got["data"].tolist() == [[0, 1, 2], [200, 254, 255]]
    assert got["labels"] == [1, 0] and got["batch_label"] == "b 1"


def test_crafted_cifar_meta_is_refused_and_runs_nothing(synthetic_root, tmp_path):
    root = tmp_path / "store" / "synthetic"
    shutil.copytree(synthetic_root, root)
    marker = tmp_path / "pwned"
    meta = root / "cifar-10-batches-py" / "batches.meta"
    meta.write_bytes(pickle.dumps({"label_names": _System(f"touch {marker}")}, protocol=2))
    with pytest.raises(DataError) as err:
        load("cifar10", root, "train")
    assert str(err.value) == (f"{meta}: malformed pickle (UnpicklingError: refused global posix.system "
                              "(not part of the format; loading it could run code))")
    assert not marker.exists()


def test_crafted_array_reconstruct_and_npy_are_refused(tmp_path):
    marker = tmp_path / "pwned"

    class FakeArray:  # numpy's reconstructor asked for something other than an ndarray
        def __reduce__(self):
            return (np._core.multiarray._reconstruct, (np.dtype, (0,), b"b"))

    with pytest.raises(DataError, match=r"x\.pkl: malformed pickle .*only numpy\.ndarray"):
        loads(pickle.dumps(FakeArray()), "x.pkl")
    npy = tmp_path / "word_sims.npy"
    np.save(npy, np.array([{"cat": _System(f"touch {marker}")}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=f"{npy}: malformed pickle .*refused global posix.system"):
        load_similarity(npy)
    assert not marker.exists()
    np.save(npy, np.array({"cat": {"words": ["cat", "dog"], "similarities": np.array([1, 0.5], np.float32)},
                           "dog": {"words": ["dog", "cat"], "similarities": np.array([1, 0.5], np.float32)}}),
            allow_pickle=True)
    names, sim = load_similarity(npy)
    assert names == ["cat", "dog"] and sim.tolist() == [[1.0, 0.5], [0.5, 1.0]]
    assert _same(load_npy(npy).item(), np.load(npy, allow_pickle=True).item())


# ---------------------------------------------------------------- 3. export

def test_export_refuses_a_crafted_checkpoint(tmp_path):
    from semcl.models.weight_formats import export_checkpoint

    marker, ckpt = tmp_path / "pwned", tmp_path / "last.pt"
    torch.save({"method": {"backbone.conv1.weight": torch.zeros(1)}, "extra": _System(f"touch {marker}")}, ckpt)
    with pytest.raises(ResultsError) as err:
        export_checkpoint(ckpt, tmp_path / "r50.pth", "torchvision")
    assert str(err.value).startswith(f"{ckpt}: refused: holds objects other than tensors") and "\n" not in str(err.value)
    assert not marker.exists() and not (tmp_path / "r50.pth").exists()


# ---------------------------------------------------------------- 4. snapshots

@pytest.fixture(scope="module")
def code(tmp_path_factory) -> tuple[Path, Path]:
    """Part of the package and the registry (its top-level modules, one paper), copied so that
    nobody edits them while the test runs, and small so that twenty snapshots take seconds."""
    import semcl
    from semcl.locations import registry_root
    base = tmp_path_factory.mktemp("code")
    package, registry = base / "src" / "semcl", base / "experiments"
    package.mkdir(parents=True)
    for module in Path(semcl.__file__).parent.glob("*.py"):
        shutil.copy(module, package)
    shutil.copytree(registry_root() / "rince", registry / "rince")
    return package, registry


def _snapshot_worker(roots: list[str], code: tuple[Path, Path], barrier, queue) -> None:
    for i, root in enumerate(roots):
        barrier.wait(timeout=60)
        try:
            queue.put((i, str(snapshot.make_snapshot(Path(root), *code)), None))
        except Exception as err:  # reported to the test, which fails on it
            queue.put((i, None, f"{type(err).__name__}: {err}"))


def _primary(results: Path, code: tuple[Path, Path]) -> Path:
    return (results / "snapshots" / snapshot.code_digest(snapshot.code_manifest(*code))[:12]).resolve()


def test_four_processes_snapshot_at_once_five_times(tmp_path, code):
    roots = [tmp_path / f"round{i}" for i in range(5)]
    for root in roots[3:]:  # these rounds start from a broken snapshot at the code's name
        broken = _primary(root, code)
        broken.mkdir(parents=True)
        (broken / "snapshot.json").write_text("{}")
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_snapshot_worker, args=([str(r) for r in roots], code, barrier, queue))
             for _ in range(4)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=120) for _ in range(4 * 5)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [err for _, _, err in got if err] == []
    for i, root in enumerate(roots):
        paths = {path for r, path, _ in got if r == i}
        primary = _primary(root, code)
        assert paths == {str(primary if i < 3 else primary.with_name(primary.name + "-1"))}
        folder = Path(paths.pop())
        assert snapshot.snapshot_problem(folder, snapshot.code_manifest(*code)) is None
        assert (folder / "src" / "semcl" / "snapshot.py").read_bytes() == (code[0] / "snapshot.py").read_bytes()
        assert sorted(p.name for p in (root / "snapshots").iterdir()) == sorted(
            {primary.name, folder.name})  # no temp folder left behind


def test_a_damaged_snapshot_is_rebuilt_not_reused(tmp_path, code, capsys):
    first = snapshot.make_snapshot(tmp_path, *code)
    assert snapshot.make_snapshot(tmp_path, *code) == first  # verified: reused
    (first / "src" / "semcl" / "run_config.py").unlink()
    second = snapshot.make_snapshot(tmp_path, *code)
    assert second == first.with_name(first.name + "-1") and snapshot.snapshot_problem(second) is None
    assert f"{first}: broken snapshot (1 file(s) missing, added or changed, e.g. src/semcl/run_config.py)" in \
        capsys.readouterr().err
    (second / "experiments" / "stray.yaml").write_text("x: 1\n")  # an added file is damage too
    assert snapshot.snapshot_problem(second) == "1 file(s) missing, added or changed, e.g. experiments/stray.yaml"
    (second / snapshot.MANIFEST).write_text("{")
    assert snapshot.snapshot_problem(second) == "manifest.json unreadable (JSONDecodeError)"
    third = snapshot.make_snapshot(tmp_path, *code)
    assert third.name == first.name + "-2" and json.loads((third / "snapshot.json").read_text()).keys() >= {"commit"}
    # byte code a job writes into its snapshot is not damage
    (third / "src" / "semcl" / "__pycache__").mkdir()
    (third / "src" / "semcl" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    assert snapshot.make_snapshot(tmp_path, *code) == third
    # the default: the package and registry in use
    assert (snapshot.make_snapshot(tmp_path / "default") / "src" / "semcl" / "snapshot.py").exists()


# ---------------------------------------------------------------- 5. finished while waiting for the lock

@pytest.fixture
def smoke_run():
    return plan_runs(get_table("rince/tab2"), "smoke")[0]


def _finish_before_lock(monkeypatch, module, store: Store, run, record: dict) -> None:
    """The interleaving: the owner writes the record after the caller's "done" check and releases
    the lock just before the caller takes it."""
    real = module.run_lock

    @contextmanager
    def late_lock(folder):
        store.write_record(run.run_id, record)
        with real(folder) as info:
            yield info

    monkeypatch.setattr(module, "run_lock", late_lock)


def _no_training(*args, **kwargs):
    raise AssertionError("a finished run was trained again")


def test_run_batch_skips_a_run_finished_before_it_took_the_lock(tmp_path, monkeypatch, smoke_run, capfd):
    from semcl.engine import harness, job
    from semcl.launch import local as launch_local
    store = Store(tmp_path)
    record = {"run_id": smoke_run.run_id, "metrics": {"top1": 41.5}}
    _finish_before_lock(monkeypatch, launch_local, store, smoke_run, record)
    monkeypatch.setattr(harness, "train", _no_training)
    monkeypatch.setattr(job, "load", _no_training)
    outcome = launch_local.RunBatch([smoke_run], tmp_path, tmp_path / "data", threads=1)()
    folder = store.run_dir(smoke_run.run_id)
    assert outcome == {smoke_run.run_id: "done"}
    assert json.loads(store.metrics_path(smoke_run.run_id).read_text()) == record
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json"]  # no failed.json, log or config
    assert f"{smoke_run.run_id}: finished by another process meanwhile; skipped" in capfd.readouterr().err
    assert store.status(smoke_run.run_id)[0] == "done"


def test_slurm_job_skips_a_run_finished_before_it_took_the_lock(tmp_path, monkeypatch, smoke_run):
    from semcl.engine import harness, job
    from semcl.launch.slurm import job as slurm_job
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    store = Store(tmp_path)
    record = {"run_id": smoke_run.run_id, "metrics": {"top1": 41.5}}
    _finish_before_lock(monkeypatch, slurm_job, store, smoke_run, record)
    monkeypatch.setattr(harness, "train", _no_training)
    assert slurm_job.RunJob(smoke_run, tmp_path, tmp_path / "data")() == smoke_run.run_id
    assert sorted(p.name for p in store.run_dir(smoke_run.run_id).iterdir()) == ["metrics.json"]
    assert job.execute_run(smoke_run, store, tmp_path / "data", stage="train") == {}


# ---------------------------------------------------------------- 6. zombie owners

@pytest.fixture
def zombie():
    """A child that has exited and is not reaped (until the test ends)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while (Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"):
        assert time.time() < deadline, "the child did not exit"
        time.sleep(0.01)
    yield proc.pid
    proc.wait()


def _zombie_lock(folder: Path, pid: int) -> runlock.LockInfo:
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    info = runlock.LockInfo(runlock.socket.gethostname(), pid, None, now, now, "zombie-owner", runlock._proc_start(pid))
    (folder / runlock.LOCK_FILE).write_text(json.dumps(info.__dict__))
    return info


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the child exit")
def test_a_zombie_owner_is_gone(tmp_path, zombie, smoke_run):
    os.kill(zombie, 0)  # the trap: a zombie still answers signal 0
    store = Store(tmp_path)
    folder = store.run_dir(smoke_run.run_id)
    info = _zombie_lock(folder, zombie)
    assert runlock.is_stale(info) and runlock.owner(folder) is None
    assert store.status(smoke_run.run_id)[0] == "missing"
    with runlock.run_lock(folder) as mine:
        assert runlock.read_lock(folder).token == mine.token


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the child exit")
def test_without_proc_ps_tells_a_zombie_and_silence_means_alive(tmp_path, zombie, monkeypatch):
    monkeypatch.setattr(runlock, "PROC", tmp_path / "no-proc")
    info = _zombie_lock(tmp_path / "run", zombie)
    if shutil.which("ps"):
        assert runlock._ps_state(zombie) == "Z" and runlock.is_stale(info)
    monkeypatch.setenv("PATH", str(tmp_path))  # no ps either: the owner cannot be told dead, so it is live
    assert runlock._ps_state(zombie) is None and not runlock.is_stale(info)
    assert runlock._pid_alive(os.getpid())
