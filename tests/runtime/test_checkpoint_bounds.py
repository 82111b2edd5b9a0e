"""A checkpoint never holds more in memory than on disk: torch.save stores its zip entries uncompressed, so an
entry that is deflated (a decompression bomb: a small file that loads as hundreds of MiB) or that declares more
bytes than the file holds is refused in one line before anything is inflated."""

from __future__ import annotations

import io
import zipfile

import pytest
import torch

from semcl.errors import ResultsError
from semcl.files import inflation_problem
from semcl.runtime.checkpoint import safe_load


def _deflated_copy(src, dst) -> None:
    """The same zip entries as `src`, rewritten with deflate (what the crafted file does)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))


def test_a_checkpoint_torch_wrote_loads(tmp_path):
    path = tmp_path / "last.pt"
    torch.save({"method": {"w": torch.arange(6.0)}, "epoch": 3}, path)
    assert inflation_problem(path) is None
    got = safe_load(path)
    assert got["epoch"] == 3 and torch.equal(got["method"]["w"], torch.arange(6.0))


def test_a_deflated_checkpoint_is_refused_before_it_inflates(tmp_path):
    src, bomb = tmp_path / "src.pt", tmp_path / "last.pt"
    torch.save({"method": {"w": torch.zeros(4 * 1024 * 1024)}}, src)  # 16 MiB of zeros
    _deflated_copy(src, bomb)
    assert bomb.stat().st_size < 100_000  # deflate shrinks the zeros ~1000:1
    assert torch.load(bomb, weights_only=True)["method"]["w"].numel() == 4 * 1024 * 1024  # torch would inflate it
    with pytest.raises(ResultsError) as err:
        safe_load(bomb)
    text = str(err.value)
    assert text.startswith(f"{bomb}: refused: ") and " compressed entries, e.g. " in text and "\n" not in text
    inflated = int(text.split("torch.save never compresses; ")[1].split(" bytes")[0].replace(",", ""))
    assert 16_777_216 < inflated < 16_777_216 + 10_000  # the zeros plus the small pickle and metadata entries


def test_an_entry_declaring_more_bytes_than_the_file_is_refused(tmp_path):
    path = tmp_path / "last.pt"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", b"x" * 100)
    raw = bytearray(buf.getvalue())
    # the central directory's uncompressed size of the one entry (offset 24 in its 46-byte header)
    at = raw.rfind(b"PK\x01\x02") + 24
    raw[at:at + 4] = (10**9).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert inflation_problem(path) == f"its entries declare 1,000,000,000 bytes, more than the file's {len(raw):,}"


@pytest.mark.parametrize("change, message", [
    ({"rng": None}, "key 'rng' missing (a resume needs a mapping with python, numpy and torch states)"),
    ({"optimizer": None}, "key 'optimizer' missing (a resume needs a mapping)"),
    ({"epoch": "1"}, "key 'epoch' = str '1': expected a whole number >= 0"),
    ({"epoch": True}, "key 'epoch' = bool 'True': expected a whole number >= 0"),
    ({"step": -2}, "key 'step' = -2: expected a whole number >= 0"),
    ({"epoch": 10**6}, "key 'epoch' = 1000000 but 'history' holds 1 finished epochs"),
    ({"history": [{"epoch": 1, "loss": float("nan")}]}, "key 'history' entry 0 has loss nan: expected a finite number"),
    ({"history": [{"epoch": 1}]}, "key 'history' entry 0 has loss None: expected a finite number"),
])
def test_a_checkpoint_a_resume_cannot_read_is_one_line(tmp_path, change, message):
    from semcl.runtime.checkpoint import load_resumable as load
    from semcl.runtime.checkpoint import rng_state

    state = {"method": {"w": torch.zeros(2)}, "optimizer": {"state": {}, "param_groups": []}, "epoch": 1, "step": 0,
             "rng": rng_state(), "history": [{"epoch": 1, "loss": 2.5}]}
    path = tmp_path / "last.pt"
    torch.save(state, path)
    assert load(path)["epoch"] == 1
    for key, value in change.items():
        if value is None:
            del state[key]
        else:
            state[key] = value
    torch.save(state, path)
    with pytest.raises(ResultsError) as err:
        load(path)
    assert str(err.value).startswith(f"{path}: {message}; ")


def test_a_full_disk_keeps_the_runs_error_and_the_cli_names_the_disk(tmp_path, monkeypatch, capsys):
    """With no space left, failed.json cannot be written: the run's own error still goes to the job's stderr,
    and a job that died without a word is explained by the results folder's free space."""
    import shutil
    from collections import namedtuple

    import semcl.engine.harness as harness_mod
    import semcl.engine.job as job_mod
    from semcl import files
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table
    from semcl.store import Store

    run = plan_runs(get_table("rince/tab2"), "smoke")[0]
    store = Store(tmp_path / "results")

    def no_space(path, obj, **kw):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(harness_mod, "method_class", lambda *a: (_ for _ in ()).throw(ValueError("bad shape at epoch 3")))
    monkeypatch.setattr(job_mod, "write_json_atomic", no_space)
    with pytest.raises(ValueError, match="bad shape"):
        job_mod.execute_run(run, store, tmp_path / "data")
    err = capsys.readouterr().err
    assert (f"semcl: run {run.run_id} failed (ValueError: bad shape at epoch 3); its failed.json could not be "
            "written ([Errno 28] No space left on device:") in err
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 4096, 4096))
    note = files.low_space_note(store.root)
    assert note.startswith(f"the disk holding {store.root} is full or over quota (0.0 MiB free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 0, 10**9))
    assert files.low_space_note(store.root) is None


def test_a_checkpoint_past_the_runs_last_epoch_is_refused(tmp_path):
    """Epoch and history agree, but the run has fewer epochs: training would be skipped and recorded as done."""
    from semcl.engine.checkpointer import Checkpointer
    from semcl.runtime.checkpoint import rng_state

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "last.pt"
    torch.save({"method": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "step": 0,
                "rng": rng_state(), "history": [{"epoch": e, "loss": 1.0} for e in (1, 2, 3)]}, path)
    saver = Checkpointer(model, opt, torch.amp.GradScaler("cpu", enabled=False), path)
    assert saver.resume(3).epoch == 3  # the last epoch: a finished run, resumed to evaluate
    with pytest.raises(ResultsError) as err:
        saver.resume(2)
    assert str(err.value) == (f"{path}: key 'epoch' = 3 beyond the run's 2 epochs; "
                              "delete it to restart the run from scratch")
