"""`semcl status` of a run whose evaluation is its own SLURM job: it follows the training job until
training is over, then the evaluation job (sacct states given here by hand)."""

from __future__ import annotations

from semcl.launch.slurm.manifest import current_job, job_ids, run_state
from semcl.store import Store


def _entry(tmp_path) -> dict:
    return {"job_id": "10_0", "run_id": "abc", "folder": str(tmp_path / "submitit" / "10_0"),
            "eval_job_id": "11_0", "eval_folder": str(tmp_path / "submitit" / "11_0")}


def _trained(store: Store) -> None:
    folder = store.run_dir("abc")
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.pt").write_bytes(b"")
    (folder / "trained.json").write_text("{}")


def test_training_then_evaluation(tmp_path):
    store = Store(tmp_path / "results")
    entry = _entry(tmp_path)
    assert job_ids([entry, {"job_id": "12"}]) == ["10_0", "11_0", "12"]
    assert run_state(store, "abc", entry, {"10_0": "RUNNING", "11_0": "PENDING"}) == ("running", "job 10_0 RUNNING")
    _trained(store)
    assert current_job(store, "abc", entry, {})[0]["job_id"] == "11_0"
    # a checkpoint is there, but the evaluation waiting for its slot is pending, not requeued
    assert run_state(store, "abc", entry, {"10_0": "COMPLETED", "11_0": "PENDING"}) == \
        ("pending", "evaluation job 11_0 PENDING")
    assert run_state(store, "abc", entry, {"10_0": "COMPLETED", "11_0": "RUNNING"}) == \
        ("running", "evaluation job 11_0 RUNNING")
    status, detail = run_state(store, "abc", entry, {"10_0": "COMPLETED", "11_0": "FAILED"})
    assert status == "failed" and detail.startswith("evaluation job 11_0 ended FAILED without metrics; log: ")
    assert f"{tmp_path / 'submitit' / '11_0'}/11_0_0_log.err" in detail


def test_a_failed_training_job_is_reported_with_its_own_log(tmp_path):
    store = Store(tmp_path / "results")
    status, detail = run_state(store, "abc", _entry(tmp_path), {"10_0": "FAILED", "11_0": "CANCELLED"})
    assert status == "failed" and detail.startswith("job 10_0 ended FAILED without metrics; log: ")
    assert f"{tmp_path / 'submitit' / '10_0'}/10_0_0_log.err" in detail


def test_a_run_without_an_evaluation_job_is_unchanged(tmp_path):
    store = Store(tmp_path / "results")
    entry = {"job_id": "7", "run_id": "abc", "folder": str(tmp_path / "7")}
    assert current_job(store, "abc", entry, {"7": "RUNNING"}) == (entry, "")
    assert run_state(store, "abc", entry, {"7": "PENDING"}) == ("pending", "job 7 PENDING")
