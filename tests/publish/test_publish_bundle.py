"""semcl publish on real smoke runs: rince/tab2's RINCE-in row, two seeds, trained here with TensorBoard on; the
bundle verifies (ours and `sha256sum -c`), holds the store's record files byte for byte, weights equal to each
run's own network, and a model-index whose numbers are the records' mean / std / n; a changed byte fails both
checks; DIR is never written inside the store nor over a folder without --force."""

from __future__ import annotations

import json
import pickle
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open

from semcl.cli.main import main
from semcl.evals.protocols import metric_key
from semcl.files import write_sha256sums
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table

ROW = "RINCE-in"
pytestmark = pytest.mark.slow  # two smoke runs trained in the fixture (about a minute)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """(results store, bundle): two smoke runs of rince/tab2 RINCE-in (seeds 123, 546), published."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SEMCL_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("SEMCL_TRACKING", "tensorboard")
    mp.delenv("SEMCL_PRECISION", raising=False)
    mp.delenv("SEMCL_REGISTRY", raising=False)
    work = tmp_path_factory.mktemp("publish")
    results = work / "results"
    assert main(["--results", str(results), "run", "rince/tab2", "--profile", "smoke", "--row", ROW, "--seeds", "2",
                 "--executor", "debug", "--data-root", str(work / "data")]) == 0
    assert main(["--results", str(results), "publish", "rince/tab2", "--profile", "smoke", "--out",
                 str(work / "b")]) == 0
    mp.undo()
    return results, work / "b"


def _runs(results: Path) -> list[str]:
    table = get_table("rince/tab2")
    return [r.run_id for r in plan_runs(table, "smoke", [ROW]) if r.row_label == ROW
            and (results / "runs" / r.run_id / "metrics.json").is_file()]


def _verify(bundle: Path, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["publish", "--verify", str(bundle)])
    return code, capsys.readouterr().err.splitlines()


def test_the_bundle_verifies_and_holds_each_runs_files(published, capsys):
    results, bundle = published
    ids = _runs(results)
    assert len(ids) == 2
    assert _verify(bundle, capsys) == (0, [])
    done = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    top = sorted(p.name for p in bundle.iterdir())
    assert top == ["README.md", "SHA256SUMS", "environment.json", "model-index.yml", "runs"]
    assert sorted(p.name for p in (bundle / "runs").iterdir()) == sorted(ids)
    for rid in ids:
        run = bundle / "runs" / rid
        names = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
        events = [n for n in names if n.startswith("tensorboard/")]
        assert events and all("events.out.tfevents" in n for n in events)
        assert [n for n in names if not n.startswith("tensorboard/")] == [
            "config.yaml", "history.jsonl", "log.txt", "metrics.json", "trained.json", "weights/model.safetensors"]
        for name in ("metrics.json", "config.yaml", "history.jsonl", "log.txt", "trained.json"):
            assert (run / name).read_bytes() == (results / "runs" / rid / name).read_bytes()
    env = json.loads((bundle / "environment.json").read_text())
    assert env["published_by"]["packages"]["safetensors"] and env["runs"][0]["run_ids"] == ids
    assert env["runs"][0]["environment"]["device"] == json.loads(
        (results / "runs" / ids[0] / "metrics.json").read_text())["device"]


def test_weights_are_each_runs_own_network(published):
    from semcl.models.backbones import build_backbone

    results, bundle = published
    for rid in _runs(results):
        state = torch.load(results / "runs" / rid / "checkpoints" / "last.pt", weights_only=True)["method"]
        want = {k.removeprefix("backbone."): v for k, v in state.items() if k.startswith("backbone.")}
        with safe_open(bundle / "runs" / rid / "weights" / "model.safetensors", "pt") as f:
            meta = f.metadata()
            got = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iteration)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
        assert (meta["run_id"], meta["table"], meta["row"], meta["network"]) == (rid, "rince/tab2", ROW, "resnet_tiny")
        load = json.loads(meta["load"])
        assert load["call"] == "semcl.models.backbones.build_backbone" and load["args"] == ["resnet_tiny"]
        net = build_backbone(*load["args"], **load["kwargs"])
        net.load_state_dict(got, strict=True)  # the builder the metadata names takes them whole
        assert not (bundle / "runs" / rid / "weights" / "config.json").exists()  # no timm architecture


def test_model_index_numbers_are_the_records(published):
    from semcl.models.backbones import build_backbone

    results, bundle = published
    doc = yaml.safe_load((bundle / "model-index.yml").read_text())
    card = (bundle / "README.md").read_text()
    assert yaml.safe_load(card.split("---\n")[1]) == doc
    assert doc["Collections"] == [{"Name": "rince", "Paper": {
        "Title": "Ranking Info Noise Contrastive Estimation: Boosting Contrastive Learning via Ranked Positives",
        "URL": "https://arxiv.org/abs/2201.11736"}, "README": "README.md", "Code": "https://github.com/boschresearch/rince"}]
    (model,) = doc["Models"]
    ids = _runs(results)
    meta = model["Metadata"]
    assert model["Name"] == "rince/tab2 RINCE-in (smoke)" and model["In Collection"] == "rince"
    assert model["Config"] == f"runs/{ids[0]}/config.yaml" and model["Weights"] == f"runs/{ids[0]}/weights/model.safetensors"
    assert meta["Run IDs"] == ids and meta["Seeds"] == [123, 546] and meta["Registry Entry"] == "experiments/rince/tab2.yaml"
    assert meta["Parameters"] == sum(p.numel() for p in build_backbone("resnet_tiny").parameters())
    records = [json.loads((results / "runs" / r / "metrics.json").read_text()) for r in ids]
    assert (meta["Epochs"], meta["Batch Size"]) == (records[0]["config"]["schedule"]["epochs"],
                                                     records[0]["config"]["optim"]["batch_size"])
    assert meta["Training Resources"] == f"1x {records[0]['device']}"
    assert meta["Device Hours"] == pytest.approx(sum(r["wall_time_s"] for r in records) / 3600, abs=1e-6)
    assert meta["Code Commit"] == records[0]["git"]["commit"]
    table = get_table("rince/tab2")
    metrics = {m: v for res in model["Results"] for m, v in res["Metrics"].items()}
    assert list(metrics) == [c.label for c in table.columns]
    assert [r["Task"] for r in model["Results"]] == ["Image Classification", "Image Retrieval",
                                                      "Out-of-Distribution Detection"]
    assert {r["Dataset"] for r in model["Results"]} == {"cifar100 (synthetic stand-in)"}
    for col in table.columns:
        values = [r["metrics"][metric_key(col, table.profile("smoke").substitute)] for r in records]
        cell = metrics[col.label]
        assert cell["N"] == 2 and cell["Paper"] is None  # no RINCE number is known (docs/papers/rince.md)
        assert cell["Mean"] == pytest.approx(statistics.mean(values), abs=1e-9)
        assert cell["Std"] == pytest.approx(statistics.stdev(values), abs=1e-9)


def test_a_changed_byte_fails_verify_and_sha256sum(published, tmp_path, capsys):
    _, bundle = published
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    rid = sorted((copy / "runs").iterdir())[0].name
    path = copy / "runs" / rid / "metrics.json"
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    code, lines = _verify(copy, capsys)
    assert code == 1 and lines[0] == f"{path.resolve()}: sha256 differs from SHA256SUMS"
    assert lines[-1].startswith(f"semcl: error: {copy}: ")
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before  # nothing written
    done = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=copy, capture_output=True, text=True)
    assert done.returncode != 0 and f"runs/{rid}/metrics.json: FAILED" in done.stdout


def test_out_inside_the_store_or_over_a_folder_is_refused(published, tmp_path, capsys):
    results, bundle = published
    args = ["--results", str(results), "publish", "rince/tab2", "--profile", "smoke", "--out"]
    inside = results / "runs" / "b"
    assert main([*args, str(inside), "--force"]) == 2
    assert capsys.readouterr().err == (f"semcl: error: --out {inside}: inside the results store {results}; a bundle "
                                       "goes elsewhere\n")
    assert not inside.exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert main([*args, str(mine)]) == 2
    assert "exists and is not empty; pass --force" in capsys.readouterr().err
    assert main([*args, str(mine), "--force"]) == 2
    assert "not a bundle" in capsys.readouterr().err and (mine / "notes.txt").read_text() == "keep"
    again = tmp_path / "again"
    shutil.copytree(bundle, again)
    (again / "stale.txt").write_text("x")
    assert main([*args, str(again), "--force"]) == 0  # a bundle is replaced whole
    assert not (again / "stale.txt").exists() and main(["publish", "--verify", str(again)]) == 0
    assert not list(tmp_path.glob(".again.*"))  # no temporary folder left beside it
    capsys.readouterr()
    assert main(["--results", str(results), "publish", "rince/tab3", "--profile", "smoke", "--out",
                 str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (f"semcl: error: rince/tab3: no finished run under profile 'smoke' in {results} "
                                       "(semcl run rince/tab3 --profile smoke first)\n")
    assert not (tmp_path / "none").exists() and not list(tmp_path.glob(".none.*"))


def test_a_tampered_bundle_is_refused_one_line_per_problem(published, tmp_path, capsys):
    _, bundle = published
    cases = {}

    def case(name):
        copy = tmp_path / name
        shutil.copytree(bundle, copy)
        cases[name] = copy
        return copy, sorted((copy / "runs").iterdir())[0]

    copy, run = case("dotdot")
    with open(copy / "SHA256SUMS", "a") as f:
        f.write(f"{'0' * 64}  ../outside.txt\n{'0' * 64}  /etc/passwd\n")
    want = {"dotdot": [f"{(copy / 'SHA256SUMS').resolve()}: line {n}: {p!r} leaves the folder"
                       for n, p in ((len((bundle / 'SHA256SUMS').read_text().splitlines()) + 1, "../outside.txt"),
                                    (len((bundle / 'SHA256SUMS').read_text().splitlines()) + 2, "/etc/passwd"))]}
    copy, run = case("symlink")
    (run / "escape").symlink_to("/etc/hostname")
    want["symlink"] = [f"{copy.resolve() / 'runs' / run.name / 'escape'}: a symbolic link (a bundle holds plain files only)"]
    copy, run = case("pth")
    torch.save({"w": torch.zeros(2)}, run / "weights" / "extra.pth")
    write_sha256sums(copy)
    want["pth"] = [f"{run / 'weights' / 'extra.pth'}: a .pth file (a pickle; a bundle holds safetensors weights only)"]
    copy, run = case("pickle")
    (run / "notes.json").write_bytes(pickle.dumps({"a": 1}))
    write_sha256sums(copy)
    want["pickle"] = [f"{run / 'notes.json'}: starts with a pickle header (a bundle holds no pickle)"]
    copy, run = case("exec")
    (run / "log.txt").chmod(0o755)
    want["exec"] = [f"{run / 'log.txt'}: executable (mode -rwxr-xr-x); a bundle holds data only"]
    copy, run = case("header")
    (run / "weights" / "model.safetensors").write_bytes(b"\xff" * 8 + b"{not json")
    write_sha256sums(copy)
    assert main(["publish", "--verify", str(copy)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{run / 'weights' / 'model.safetensors'}: safetensors header does not parse")
    for name, lines in want.items():
        code, got = _verify(cases[name], capsys)
        assert code == 1, name
        assert got[:-1] == lines, name
        assert got[-1] == f"semcl: error: {cases[name]}: {len(lines)} problem(s); not a sound bundle"


def test_a_model_index_that_breaks_the_schema_names_the_key(published, tmp_path, capsys):
    from semcl.publish.schema import model_index_problems

    _, bundle = published
    doc = yaml.safe_load((bundle / "model-index.yml").read_text())
    where = "model-index.yml"
    assert model_index_problems(doc, bundle, where) == []
    breaks = {
        ("Models", "Config"): f"{where}: Models[0]: key 'Config' missing",
        ("Models", "In Collection"): f"{where}: Models[0]: key 'In Collection' is None, no collection's Name",
        ("Models", "Results"): f"{where}: Models[0]: key 'Results' missing or not a non-empty list",
        ("Collections", "Paper"): f"{where}: Collections[0]: key 'Paper' needs a mapping with 'Title' (and 'URL')",
        ("Collections", "README"): f"{where}: Collections[0]: key 'README' missing",
    }
    for (section, key), line in breaks.items():
        broken = yaml.safe_load((bundle / "model-index.yml").read_text())
        del broken[section][0][key]
        assert model_index_problems(broken, bundle, where) == [line], key
    broken = yaml.safe_load((bundle / "model-index.yml").read_text())
    del broken["Models"][0]["Results"][0]["Task"]
    broken["Models"][0]["Config"] = "../../etc/passwd"
    assert model_index_problems(broken, bundle, where) == [
        f"{where}: Models[0]: key 'Config' '../../etc/passwd' leaves the bundle",
        f"{where}: Models[0]: Results[0]: key 'Task' missing or not a string"]
    # through the CLI: a resummed bundle whose model-index lost a model's Config
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    broken = yaml.safe_load((copy / "model-index.yml").read_text())
    del broken["Models"][0]["Config"]
    (copy / "model-index.yml").write_text(yaml.safe_dump(broken, sort_keys=False))
    write_sha256sums(copy)
    code, lines = _verify(copy, capsys)
    assert code == 1 and lines[:2] == [f"{copy / 'model-index.yml'}: Models[0]: key 'Config' missing",
                                       f"{copy / 'README.md'}: front matter differs from model-index.yml"]
