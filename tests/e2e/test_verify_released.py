"""`semcl verify` end to end at smoke scale: a GPaCo checkpoint written in the official layout (the DDP-wrapped
MoCo builder's names, a smoke-sized network, synthetic values) is found by name, read by the strict converter,
evaluated with the table's columns as a run keyed by its sha256, and shown by `semcl table` as its own row beside
the README number. `semcl weights check` prints what loaded; a wrong file is one line and nothing is written."""

from __future__ import annotations

import json

import torch

from semcl.cli.main import main
from semcl.engine.released import _network, released_row, released_run_id
from semcl.registry.tables import get_table

ROW = "GPaCo ResNet-50 (authors checkpoint)"


def _official_file(path, seed: int) -> None:
    table = get_table("gpaco/imagenet-lt")
    row, _ = released_row(table, ROW)
    sd = _network(table, row, "smoke").state_dict()
    g = torch.Generator().manual_seed(seed)
    names = {"backbone.": "module.encoder_q.", "head.": "module.encoder_q.fc.", "classifier.fc.": "module.linear.",
             "bank.features": "module.queue", "bank.labels": "module.queue_l", "bank.ptr": "module.queue_ptr"}
    state = {}
    for k, v in sd.items():
        prefix = next((p for p in names if k.startswith(p)), None)
        if prefix is None:  # center_offset: semcl's own
            continue
        if v.is_floating_point():
            value = torch.randn(v.shape, generator=g) * 0.3
            value = value.abs() + 0.5 if k.endswith("running_var") else value
        else:
            value = torch.zeros_like(v)
        state[names[prefix] + k[len(prefix):]] = value
    torch.save({"epoch": 400, "arch": "resnet50", "acc": 58.5, "state_dict": state, "optimizer": {}}, path)


def test_verify_evaluates_the_authors_checkpoint_and_the_table_shows_it(tmp_path, capsys):
    weights, results = tmp_path / "weights", tmp_path / "results"
    weights.mkdir()
    _official_file(weights / "gpaco_r50_imagenetlt.pth.tar", seed=0)
    assert main(["--results", str(results), "weights", "check", "gpaco/imagenet-lt", ROW,
                 str(weights / "gpaco_r50_imagenetlt.pth.tar"), "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "65 tensors" in out and "semcl's own, not in the file: center_offset" in out and not results.exists()
    from semcl import api

    net = api.load_released("gpaco/imagenet-lt", ROW, weights / "gpaco_r50_imagenetlt.pth.tar", profile="smoke")
    saved = torch.load(weights / "gpaco_r50_imagenetlt.pth.tar", weights_only=True)["state_dict"]
    assert not net.training and torch.equal(net.classifier.fc.weight, saved["module.linear.weight"])

    assert main(["--results", str(results), "verify", "gpaco/imagenet-lt", "--weights", str(weights),
                 "--profile", "smoke", "--executor", "debug"]) == 0
    out = capsys.readouterr().out
    run_id = out.split(f"{ROW}: ")[1].split("-> run ")[1].split()[0]
    record = json.loads((results / "runs" / run_id / "metrics.json").read_text())
    assert record["row"] == ROW and record["history"] == [] and record["released"]["layout"] == "pcl-moco"
    top1 = record["metrics"]["acc_overall"]  # the Top-1 column's metric (accuracy, group overall)
    assert 0 <= top1 <= 100

    assert main(["--results", str(results), "table", "gpaco/imagenet-lt", "--profile", "smoke"]) == 0
    table = capsys.readouterr().out
    line = next(line for line in table.splitlines() if line.startswith(f"| {ROW} |"))
    assert f"{top1:.2f} (n=1) / 58.50 / {top1 - 58.5:.2f}" in line
    assert "Released rows ('GPaCo ResNet-50 (authors checkpoint)'" in table

    # another file (the same layout, other values) is another run: the id hashes the file's sha256
    cfg = get_table("gpaco/imagenet-lt").resolve(get_table("gpaco/imagenet-lt").row(
        "GPaCo ResNet-50 (code alpha 0.045)"), "smoke")
    assert released_run_id(cfg, 123, record["released"]["sha256"]) == run_id
    assert released_run_id(cfg, 123, "0" * 64) != run_id


def test_verify_refuses_a_wrong_file_in_one_line_before_anything_is_written(tmp_path, capsys):
    weights, results = tmp_path / "weights", tmp_path / "results"
    weights.mkdir()
    _official_file(weights / "gpaco_r50_imagenetlt.pth.tar", seed=0)
    path = weights / "gpaco_r50_imagenetlt.pth.tar"
    path.write_bytes(path.read_bytes()[:1000])  # truncated
    assert main(["--results", str(results), "verify", "gpaco", "--weights", str(weights),
                 "--profile", "smoke", "--executor", "debug"]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "not found" not in line]
    assert len(err) == 1 and "not a readable checkpoint" in err[0] and ROW in err[0] and str(path) in err[0]
    assert not results.exists()
    assert main(["weights", "check", "gpaco/imagenet-lt", "GPaCo ResNet-50 (code alpha 0.045)", str(path)]) == 2
    assert "is no released row" in capsys.readouterr().err
    _official_file(path, seed=0)  # a whole GPaCo file, named as a PaCo row's: another network
    assert main(["weights", "check", "paco/imagenet-lt", "PaCo ResNet-50 (authors checkpoint)", str(path),
                 "--profile", "smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not this row's network" in err[0] and "missing head.1.weight" in err[0]


def test_plan_costs_each_released_row_as_one_gpu_evaluation_outside_the_totals(capsys):
    assert main(["plan", "gpaco/imagenet-lt", "--profile", "paper"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("# released")]
    assert len(lines) == 3 and all("evaluation only, 1 GPU" in line and line.endswith("GPU-h") for line in lines)
    assert "GPaCo ResNet-50 (authors checkpoint)" in lines[0]
    assert "# gpaco/imagenet-lt total: 24 runs" in out  # the trained rows' runs alone, as before


def test_verify_students_distils_from_the_authors_teacher_file(tmp_path, capsys):
    from semcl.engine.released import _network, released_row
    from semcl.registry.tables import get_table

    table = get_table("scns/kd-cifar100")
    row, _ = released_row(table, "Teacher resnet56 (authors checkpoint)")
    sd = _network(table, row, "smoke").state_dict()
    g = torch.Generator().manual_seed(0)
    state = {}  # RepDistiller's names: layer<i>.<j>. (semcl's layer<i>.blocks.<j>.), under no prefix
    for k, v in sd.items():
        name = k[len("backbone."):].replace(".blocks.", ".")
        x = torch.randn(v.shape, generator=g) * 0.2 if v.is_floating_point() else torch.zeros_like(v)
        state[name] = x.abs() + 0.5 if name.endswith("running_var") else x
    weights, results = tmp_path / "weights", tmp_path / "results"
    (weights / "resnet56_vanilla").mkdir(parents=True)
    torch.save({"epoch": 240, "model": state, "accuracy": 72.34, "optimizer": {}},
               weights / "resnet56_vanilla" / "ckpt_epoch_240.pth")
    assert main(["--results", str(results), "verify", "scns/kd-cifar100", "--weights", str(weights),
                 "--profile", "smoke", "--executor", "debug", "--students"]) == 0
    out = capsys.readouterr().out
    student = next(line for line in out.splitlines() if "KD resnet56 to resnet20 (authors teacher)" in line)
    teacher_run = student.split("learns from ")[1].split()[0]
    student_run = student.split("-> run ")[1].split()[0]
    record = json.loads((results / "runs" / student_run / "metrics.json").read_text())
    assert record["depends_on"] == [teacher_run] and len(record["history"]) == 2
    assert main(["--results", str(results), "table", "scns/kd-cifar100", "--profile", "smoke"]) == 0
    table_text = capsys.readouterr().out
    line = next(x for x in table_text.splitlines() if x.startswith("| KD resnet56 to resnet20 (authors teacher) |"))
    assert f"{record['metrics']['acc_overall']:.2f} (n=1)" in line and "Rows learning from the authors' checkpoints" in table_text
