"""Reliability, round two (issue 27 items 7, 11, 12, 13): every user-facing file is written
temp-then-rename, the failures a user meets are one line naming the file (and the remedy), a
non-finite metric is refused, and the advice the tool gives clears the state it describes."""

from __future__ import annotations

import errno
import io
import json
import stat
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from semcl import files
from semcl.cli import main
from semcl.errors import ResultsError
from semcl.evals.protocols import metric_key
from semcl.registry import get_table
from semcl.runs import Store, plan_runs


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _no_temp_left(folder: Path) -> None:
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


# ---- item 7: temp-then-rename everywhere --------------------------------------------------------------

def _refuse_rename(*a, **k):
    raise OSError(errno.EIO, "Input/output error (injected before the rename)")


def test_interrupted_text_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "t.md"
    files.write_text_atomic(path, "old\n")
    assert stat.S_IMODE(path.stat().st_mode) == files.file_mode()  # not mkstemp's 0600
    monkeypatch.setattr(files.os, "replace", _refuse_rename)
    with pytest.raises(OSError):
        files.write_text_atomic(path, "new " * 100_000)
    assert path.read_text() == "old\n"
    _no_temp_left(tmp_path)


def test_a_write_that_fails_midway_names_the_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "points.csv"
    files.write_csv_atomic(path, pd.DataFrame({"x": [1, 2]}), index=False)

    def full_disk(f):
        f.write(b"x,y\n1,")
        raise OSError(errno.ENOSPC, "No space left on device")  # what f.write raises: no file name

    with pytest.raises(OSError) as err:
        files.write_atomic(path, full_disk)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert path.read_text() == "x\n1\n2\n"
    _no_temp_left(tmp_path)


def test_table_written_by_the_cli_survives_an_interrupted_rewrite(tmp_path, monkeypatch):
    code, _, _ = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    path = tmp_path / "tables" / "rince_tab2.smoke.md"
    assert code == 0
    old = path.read_text()
    assert old.startswith("**rince/tab2")
    monkeypatch.setattr(files.os, "replace", _refuse_rename)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2 and path.read_text() == old
    assert _one_line(err).startswith(f"semcl: error: {path}: Input/output error")
    _no_temp_left(path.parent)


def test_figure_png_is_replaced_whole_or_not_at_all(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = tmp_path / "f.png"
    files.save_figure_atomic(fig, path)
    png = path.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(TypeError):
        files.save_figure_atomic(fig, path, dpi="not a number")  # savefig fails after the temp file is open
    plt.close(fig)
    assert path.read_bytes() == png
    _no_temp_left(tmp_path)


@pytest.mark.parametrize("text", ["run_id: abc\nconfig:\n  model: {backbone: resnet", "", "- a\n- b\n"])
def test_truncated_teacher_config_is_one_line_naming_it(tmp_path, text):
    from semcl.methods.distill.teacher import run_backbone

    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ResultsError) as err:
        run_backbone(SimpleNamespace(run_dir=tmp_path, run_id="abc123"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'config.yaml'}: ")
    assert "move teacher run abc123's folder away to retrain it" in msg


def test_teacher_config_written_by_the_engine_reads_back(tmp_path):
    from semcl.methods.distill.teacher import run_backbone

    files.write_text_atomic(tmp_path / "config.yaml", "config:\n  model: {backbone: resnet8x4}\n  method: {}\n")
    assert run_backbone(SimpleNamespace(run_dir=tmp_path, run_id="x")) == "resnet8x4"


# ---- item 12: non-finite metrics ----------------------------------------------------------------------

def _stored_value(tmp_path: Path, value) -> tuple[Store, str, str]:
    table = get_table("rince/tab2")
    run = plan_runs(table, "smoke")[0]
    key = metric_key(table.columns[0], table.profile("smoke").substitute)
    store = Store(tmp_path)
    path = store.metrics_path(run.run_id)
    path.parent.mkdir(parents=True)
    # json.dumps writes NaN / Infinity, which json.loads reads back as floats
    path.write_text(json.dumps({"run_id": run.run_id, "metrics": {key: value}}))
    return store, run.run_id, key


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_metric_in_a_record_is_refused_by_table(tmp_path, value):
    store, run_id, key = _stored_value(tmp_path, value)
    code, _, err = _cli("--results", str(tmp_path), "table", "rince/tab2", "--profile", "smoke")
    assert code == 2
    assert _one_line(err) == (f"semcl: error: {store.metrics_path(run_id)}: key 'metrics.{key}' is {value!r}, "
                              "not a finite number; move the file away to rerun this run\n")
