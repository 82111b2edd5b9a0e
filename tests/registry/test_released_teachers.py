"""`--teachers released` (semcl.registry.released_teachers): every student of a teacher the authors released learns
from the released row when its file is at hand, whatever its distillation method, under its own label; its run id
moves with the file's sha256; the registered rows and the students of teachers without a file keep their run ids;
`semcl table --teachers released` shows them with notes saying which teacher each group has."""

from __future__ import annotations

import pytest

from semcl.cli.main import main
from semcl.engine.released import index_path
from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import ReleasedFile, plan_runs
from semcl.registry.released_teachers import with_released_teachers
from semcl.registry.tables import get_table
from semcl.store import Store

TEACHER = "Teacher resnet56 (authors checkpoint)"
STUDENTS = ["KD", "FitNet", "AT", "SP", "CC", "VID", "RKD", "PKT", "AB", "FT", "FSP", "NST", "CRD", "CRD+KD",
            "CRD (InfoNCE)", "SCNS-class", "SCNS-instance", "SCNS-class + LM", "SCNS-instance + LM"]


def _file(sha: str) -> dict[str, ReleasedFile]:
    return {TEACHER: ReleasedFile(f"/w/{sha[:4]}.pth", sha, "repdistiller")}


def _ids(table, files=None) -> dict[str, str]:
    return {r.row_label: r.run_id for r in plan_runs(table, "smoke", released=files) if r.seed == 123}


def test_every_student_of_the_released_teacher_learns_from_its_file_and_nothing_else_moves():
    table = get_table("scns/kd-cifar100")
    view = with_released_teachers(table, [TEACHER])
    swapped = [r.label for r in view.rows if r.teacher == TEACHER]
    assert swapped == [f"{m} resnet56 to resnet20" for m in STUDENTS]  # every method, labels kept
    assert "KD resnet56 to resnet20 (authors teacher)" not in [r.label for r in view.rows]  # the twin: shown once
    assert "KD resnet110 to resnet20 (authors teacher)" in [r.label for r in view.rows]  # no file: twin stays

    registered, a, b = _ids(table), _ids(view, _file("a" * 64)), _ids(view, _file("b" * 64))
    twin = _ids(table, _file("a" * 64))["KD resnet56 to resnet20 (authors teacher)"]
    assert a["KD resnet56 to resnet20"] == twin  # the registry's plain-KD twin is this very run
    for label in swapped:
        assert a[label] != registered[label] and a[label] != b[label]  # the file's sha256 in the run id
    others = [r.label for r in table.rows if r.label in registered and r.label not in swapped]
    assert len(others) > 200 and all(a[k] == registered[k] for k in others)  # teachers, resnet110's students, ...
    # without the teacher's file the view plans the registered rows: the trained teacher stands in
    stand_in = with_released_teachers(table, [])
    assert [r.teacher for r in stand_in.rows if r.label == "CRD resnet56 to resnet20"] == ["Teacher resnet56"]
    assert _ids(stand_in)["CRD resnet56 to resnet20"] == registered["CRD resnet56 to resnet20"]


def test_a_table_without_students_of_released_teachers_is_one_line():
    with pytest.raises(ConfigError, match=r"imagenet-lt.yaml: --teachers released: no row of gpaco/imagenet-lt "
                                         r"learns from a teacher the authors released \(rows with a released "
                                         r"checkpoint: GPaCo ResNeXt-101"):
        with_released_teachers(get_table("gpaco/imagenet-lt"), [])


def test_table_shows_the_students_of_the_verified_teacher_and_says_which_teachers(tmp_path, capsys):
    table, store = get_table("scns/kd-cifar100"), Store(tmp_path / "results")
    sha = "c" * 64
    teacher_run = next(r for r in plan_runs(table, "smoke", released=_file(sha)) if r.row_label == TEACHER)
    # what `semcl verify` leaves: the evaluation's record and the index of the file verified last
    write_json_atomic(store.metrics_path(teacher_run.run_id), {"run_id": teacher_run.run_id, "metrics": {
        "acc_overall": 72.5}, "released": {"file": "/w/resnet56_vanilla/ckpt_epoch_240.pth", "sha256": sha}})
    write_json_atomic(index_path(store, table.id, "smoke"), {TEACHER: teacher_run.run_id})
    view = with_released_teachers(table, [TEACHER])
    student = next(r for r in plan_runs(view, "smoke", released=_file(sha))
                   if r.row_label == "SCNS-class resnet56 to resnet20" and r.seed == 123)
    assert student.depends_on == (teacher_run.run_id,)
    write_json_atomic(store.metrics_path(student.run_id), {"run_id": student.run_id, "metrics": {"acc_overall": 61.25}})

    assert main(["--results", str(store.root), "table", "scns/kd-cifar100", "--profile", "smoke",
                 "--teachers", "released"]) == 0
    captured = capsys.readouterr()
    line = next(x for x in captured.out.splitlines() if x.startswith("| SCNS-class resnet56 to resnet20 |"))
    assert "61.25 (n=1)" in line
    assert ("Teachers (--teachers released): the 19 rows taught by 'Teacher resnet56' learn from "
            f"'{TEACHER}', the authors' file") in captured.out
    assert ("Teachers (--teachers released): no file of the authors' 'Teacher resnet110' here (semcl verify "
            "scns/kd-cifar100 --weights DIR): its 38 students learn from the teacher trained here") in captured.out
    assert "variants/teachers-released/scns_kd-cifar100.smoke.md" in captured.err
    # the registered table: the trained-teacher row, not the student of the authors' file
    assert main(["--results", str(store.root), "table", "scns/kd-cifar100", "--profile", "smoke"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| SCNS-class resnet56 to resnet20 |"))
    assert "61.25" not in line


def test_verify_asks_for_students_with_released_teachers(tmp_path, capsys):
    assert main(["--results", str(tmp_path / "r"), "verify", "scns/kd-cifar100", "--weights", str(tmp_path),
                 "--profile", "smoke", "--teachers", "released"]) == 2
    assert capsys.readouterr().err.strip() == ("semcl: error: --teachers released picks the students --students "
                                               "trains: add --students")
