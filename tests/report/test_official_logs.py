# ruff: noqa: E501  (the log excerpts are lines as the official scripts print them)
"""The authors' training logs (semcl.report.official_logs): an excerpt in each script's printed format parses to the
epochs it holds, with the epoch's last running-average loss and the test top-1 that follows it; `semcl curves
--official-log` draws it beside ours, epoch by epoch."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from semcl.errors import DataError
from semcl.report.official_logs import parse_log

# PaCo/GPaCo paco_lt.py: ProgressMeter lines (epochs from 0, loss {:.4e}), validate's summary lines
PCL = """Epoch: [0][   0/1803]\tTime  3.210 ( 3.210)\tData  2.100 ( 2.100)\tLoss 8.1234e+00 (8.1234e+00)\tAcc@1   0.00 (  0.00)\tAcc@5   0.00 (  0.00)
Epoch: [0][1800/1803]\tTime  0.410 ( 0.420)\tData  0.010 ( 0.020)\tLoss 6.0000e+00 (6.5432e+00)\tAcc@1  10.00 (  5.00)\tAcc@5  20.00 ( 12.00)
Test: [  0/391]\tTime  1.000 ( 1.000)\tLoss 5.0000e+00 (5.0000e+00)\tAcc@1  12.50 ( 12.50)\tAcc@5  30.00 ( 30.00)
 * Acc@1 11.234 Acc@5 28.500
Many_acc: 0.20000, Medium_acc: 0.05000 Low_acc: 0.00000
Epoch: [1][   0/1803]\tTime  0.500 ( 0.500)\tData  0.010 ( 0.010)\tLoss 5.9000e+00 (5.9000e+00)\tAcc@1  12.00 ( 12.00)\tAcc@5  25.00 ( 25.00)
Epoch: [1][1800/1803]\tTime  0.410 ( 0.420)\tData  0.010 ( 0.020)\tLoss 5.1000e+00 (5.4321e+00)\tAcc@1  14.00 ( 13.00)\tAcc@5  30.00 ( 29.00)
 * Acc@1 18.500 Acc@5 40.125
"""
# RINCE main_supcon.py: `Train: [epoch][idx+1/N]` with BT / DT / loss, then `epoch E, total time T`
RINCE = """Dataset size: 50000
Train: [1][10/97]\tBT 0.512 (0.600)\tDT 0.010 (0.050)\tloss 9.120 (9.300)
Train: [1][90/97]\tBT 0.512 (0.520)\tDT 0.010 (0.020)\tloss 8.000 (8.400)
epoch 1, total time 51.20
Train: [2][10/97]\tBT 0.512 (0.600)\tDT 0.010 (0.050)\tloss 7.900 (7.950)
Train: [2][90/97]\tBT 0.512 (0.520)\tDT 0.010 (0.020)\tloss 7.500 (7.700)
epoch 2, total time 50.90
"""
# RepDistiller helper/loops.py train_vanilla (epochs from 1, loss {:.4f}) and validate
CRD = """==> training...
Epoch: [1][0/782]\tTime 0.100 (0.100)\tData 0.050 (0.050)\tLoss 4.6100 (4.6100)\tAcc@1 1.562 (1.562)\tAcc@5 6.250 (6.250)
Epoch: [1][700/782]\tTime 0.020 (0.021)\tData 0.001 (0.002)\tLoss 3.9000 (4.1234)\tAcc@1 10.938 (7.500)\tAcc@5 30.000 (25.000)
epoch 1, total time 20.12
Test: [0/79]\tTime 0.050 (0.050)\tLoss 3.7000 (3.7000)\tAcc@1 12.500 (12.500)\tAcc@5 35.938 (35.938)
 * Acc@1 11.090 Acc@5 33.120
"""


@pytest.mark.parametrize("text, fmt, epochs, losses, top1", [
    (PCL, "pcl", [1, 2], [6.5432, 5.4321], [11.234, 18.5]),
    (RINCE, "rince-cifar", [1, 2], [8.4, 7.7], [math.nan, math.nan]),
    (CRD, "repdistiller", [1], [4.1234], [11.09]),
])
def test_each_official_log_parses_to_the_epochs_it_holds(tmp_path, text, fmt, epochs, losses, top1):
    path = tmp_path / "train.log"
    path.write_text(text)
    found, log = parse_log(path)
    assert found == fmt
    assert log["epoch"].tolist() == epochs
    assert log["loss"].tolist() == pytest.approx(losses)
    pd.testing.assert_series_equal(log["test_top1"], pd.Series(top1, name="test_top1"), check_exact=False)
    assert parse_log(path, fmt)[1].equals(log)  # named: the same


def test_a_log_of_no_known_format_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "other.log"
    path.write_text("step 1 loss 3.0\n")
    with pytest.raises(DataError, match=r"other.log: no training line of a known official log format"):
        parse_log(path)
    with pytest.raises(DataError, match=r"other.log: no training line of the 'rince-cifar' format"):
        parse_log(path, "rince-cifar")


def test_curves_draw_the_authors_log_beside_ours_epoch_by_epoch(tmp_path, capsys):
    from semcl.cli.main import main

    path = tmp_path / "gpaco_imagenetlt_r50.log"
    path.write_text(PCL)
    out = tmp_path / "curves"
    # no run of ours yet: the authors' curve alone (verify before you train)
    assert main(["--results", str(tmp_path / "results"), "curves", "gpaco/imagenet-lt", "--profile", "smoke",
                 "--official-log", str(path), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "authors' log (pcl)" in text and "6.5432" in text and "5.4321" in text
    csv = pd.read_csv(out / "gpaco_imagenet-lt.smoke.loss.csv")
    assert csv["row"].unique().tolist() == ["authors' log (pcl)"] and csv["mean"].tolist() == [6.5432, 5.4321]
    assert (out / "gpaco_imagenet-lt.smoke.loss.png").stat().st_size > 0

    # one run of ours with two epochs of history: both curves, epoch by epoch
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    run = next(r for r in plan_runs(get_table("gpaco/imagenet-lt"), "smoke") if r.row_label == "GPaCo ResNet-50")
    folder = tmp_path / "results" / "runs" / run.run_id
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text('{"epoch": 1, "loss": 7.25}\n{"epoch": 2, "loss": 6.125}\n')
    assert main(["--results", str(tmp_path / "results"), "curves", "gpaco/imagenet-lt", "--profile", "smoke",
                 "--official-log", str(path), "--official-log-format", "pcl", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "GPaCo ResNet-50" in lines[0] and "authors' log (pcl)" in lines[0]
    assert lines[2].split() == ["1", "7.2500", "6.5432"] and lines[3].split() == ["2", "6.1250", "5.4321"]
    assert main(["--results", str(tmp_path / "results"), "curves", "gpaco/imagenet-lt", "--profile", "smoke", "--official-log", str(path),
                 "--metric", "lr", "--out", str(out)]) == 2
    assert "has no 'lr' per epoch" in capsys.readouterr().err


def test_html_report_embeds_the_curves_beside_the_authors_log_and_names_it(tmp_path, capsys):
    import base64

    from semcl.cli.main import main

    path = tmp_path / "gpaco_r50_imagenetlt.log"
    path.write_text(PCL)
    out, results = tmp_path / "reports", str(tmp_path / "results")
    assert main(["--results", results, "report", "gpaco", "--profile", "smoke", "--html", "--out", str(out),
                 "--official-log", f"gpaco/imagenet-lt={path}"]) == 0
    capsys.readouterr()
    page = (out / "gpaco.smoke.html").read_text()
    png = out / "curves" / "gpaco_imagenet-lt.smoke.loss.png"
    assert f'src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode("ascii")}"' in page
    line = (f"gpaco/imagenet-lt: our training loss per epoch (mean, min–max over seeds) beside the authors' log "
            f"<code>{path}</code> (format pcl, 2 epochs, dashed black)")
    assert line.replace("'", "&#x27;") in page and '<h2 id="official-logs">' in page
    assert pd.read_csv(png.with_suffix(".csv"))["mean"].tolist() == [6.5432, 5.4321]  # the log's epochs drawn
    md = (out / "gpaco.smoke.md").read_text()
    assert f"`{path}` (format pcl, 2 epochs" in md and "![gpaco/imagenet-lt](curves/gpaco_imagenet-lt.smoke.loss.png)" in md


@pytest.mark.parametrize("pair, message", [
    ("{other}", r"^semcl: error: .*other.log: no training line of a known official log format \(pcl, rince-cifar, "
                r"repdistiller\)$"),
    ("gpaco/imagenet-lt", r"^semcl: error: --official-log 'gpaco/imagenet-lt': expected TABLE=FILE"),
    ("rince/tab2={log}", r"^semcl: error: --official-log 'rince/tab2=.*': 'rince/tab2' is no table of this paper"),
])
def test_html_report_refuses_a_bad_official_log_in_one_line_writing_nothing(tmp_path, capsys, pair, message):
    from semcl.cli.main import main

    (tmp_path / "other.log").write_text("step 1 loss 3.0\n")
    (tmp_path / "pcl.log").write_text(PCL)
    pair = pair.format(other=f"gpaco/imagenet-lt={tmp_path / 'other.log'}", log=tmp_path / "pcl.log")
    out = tmp_path / "reports"
    assert main(["--results", str(tmp_path / "results"), "report", "gpaco", "--profile", "smoke", "--html",
                 "--out", str(out), "--official-log", pair]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.match(message, err[0]), err
    assert not out.exists()
