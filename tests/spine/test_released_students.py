"""KD students of the authors' released teachers (registry `teacher: <released row>`): planned only with the
teacher file at hand, their run ids and training keys hold the file's sha256; without the file they are not planned
and no existing run id moves (tests/golden/run_ids.json holds the rest)."""

from __future__ import annotations

from semcl.registry.plan import ReleasedFile, plan_runs
from semcl.registry.tables import get_table

TEACHER = "Teacher resnet56 (authors checkpoint)"
STUDENT = "KD resnet56 to resnet20 (authors teacher)"


def _student(files):
    runs = plan_runs(get_table("scns/kd-cifar100"), "smoke", [STUDENT], released=files)
    return {r.row_label: r for r in runs}


def test_a_students_run_id_and_training_key_move_with_its_teachers_sha256():
    a = _student({TEACHER: ReleasedFile("/w/a.pth", "a" * 64, "repdistiller")})
    b = _student({TEACHER: ReleasedFile("/w/b.pth", "b" * 64, "repdistiller")})
    same = _student({TEACHER: ReleasedFile("/elsewhere/a.pth", "a" * 64, "repdistiller")})
    assert set(a) == {TEACHER, STUDENT}
    assert a[STUDENT].run_id != b[STUDENT].run_id and a[STUDENT].train_key != b[STUDENT].train_key
    assert a[TEACHER].run_id != b[TEACHER].run_id
    assert a[STUDENT].depends_on == (a[TEACHER].run_id,) and a[TEACHER].released.sha256 == "a" * 64
    # the same file elsewhere is the same run
    assert (same[STUDENT].run_id, same[STUDENT].train_key) == (a[STUDENT].run_id, a[STUDENT].train_key)


def test_without_the_teacher_file_the_student_is_not_planned_and_its_twin_is():
    table = get_table("scns/kd-cifar100")
    labels = {r.row_label for r in plan_runs(table, "smoke")}
    assert STUDENT not in labels and TEACHER not in labels and "KD resnet56 to resnet20" in labels
    twin = next(r for r in plan_runs(table, "smoke") if r.row_label == "KD resnet56 to resnet20")
    with_file = _student({TEACHER: ReleasedFile("/w/a.pth", "a" * 64, "repdistiller")})
    assert twin.run_id != with_file[STUDENT].run_id  # the trained-teacher row keeps its own id
