"""semcl export: safetensors by default (no pickle), `.pth` on request; an --out inside the results store, over an
existing file without --force, or below a file is refused in one line and nothing changes (issue 53, finding 1
and the `afile/x.pth` message of finding 12)."""

from __future__ import annotations

import json

import torch
import yaml
from safetensors import safe_open

from semcl.cli.main import main
from semcl.files import sha256_file, write_json_atomic
from semcl.models.backbones import build_backbone
from semcl.runtime.checkpoint import save_atomic

CONFIG = {"method": {"name": "ce"}, "model": {"backbone": "resnet_tiny"}}


def _store(tmp_path):
    """A store with one finished run of resnet_tiny (config.yaml, checkpoints/last.pt, metrics.json)."""
    torch.manual_seed(0)
    net = build_backbone("resnet_tiny")
    folder = tmp_path / "results" / "runs" / "tiny"
    save_atomic({"method": {f"backbone.{k}": v for k, v in net.state_dict().items()}, "epoch": 1},
                folder / "checkpoints" / "last.pt")
    (folder / "config.yaml").write_text(yaml.safe_dump({"run_id": "tiny", "seed": 1, "config": CONFIG}))
    write_json_atomic(folder / "metrics.json", {"run_id": "tiny", "metrics": {"top1": 1.0}, "config": CONFIG,
                                                "table": "t/x", "row": "r", "profile": "smoke", "seed": 1})
    return tmp_path / "results", folder, net


def _export(results, *more):
    return main(["--results", str(results), "export", "tiny", "--format", "state_dict", *more])


def test_default_is_safetensors_with_the_backbones_tensors_and_pth_on_request(tmp_path, capsys):
    results, _, net = _store(tmp_path)
    assert _export(results) == 0
    weights = results / "exports" / "tiny" / "resnet_tiny.state_dict.safetensors"
    assert capsys.readouterr().out.splitlines()[0] == f"wrote {weights}"
    with safe_open(weights, "pt") as f:
        assert f.metadata() == {"source_run": "tiny", "format": "state_dict", "backbone": "resnet_tiny"}
        got = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iteration)
    want = net.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    meta = json.loads(weights.with_name(weights.name + ".json").read_text())
    assert (meta["container"], meta["sha256"]) == ("safetensors", sha256_file(weights))
    assert _export(results, "--container", "pickle") == 0
    pth = results / "exports" / "tiny" / "resnet_tiny.state_dict.pth"
    assert torch.load(pth, weights_only=True).keys() == want.keys()


def test_out_inside_the_store_is_refused_and_last_pt_is_unchanged(tmp_path, capsys):
    results, folder, _ = _store(tmp_path)
    last, record = folder / "checkpoints" / "last.pt", folder / "metrics.json"
    before = {p: p.read_bytes() for p in (last, record)}
    for target in (last, record, results / "elsewhere.safetensors"):
        for force in ([], ["--force"]):
            assert _export(results, "--out", str(target), *force) == 2
            err = capsys.readouterr().err
            assert err == (f"semcl: error: --out {target}: inside the results store {results} (its runs' files are "
                           f"never replaced); write it elsewhere or under {results / 'exports'}\n")
    assert {p: p.read_bytes() for p in before} == before
    assert not (results / "elsewhere.safetensors").exists() and not (results / "exports").exists()


def test_an_existing_file_needs_force_and_a_file_as_folder_is_one_line(tmp_path, capsys):
    results, _, _ = _store(tmp_path)
    out = tmp_path / "mine.safetensors"
    out.write_bytes(b"keep me")
    assert _export(results, "--out", str(out)) == 2
    assert capsys.readouterr().err == f"semcl: error: --out {out}: exists; pass --force to replace it\n"
    assert out.read_bytes() == b"keep me" and not (tmp_path / "mine.safetensors.json").exists()
    assert _export(results, "--out", str(out), "--force") == 0
    assert out.read_bytes()[8:9] == b"{"  # a safetensors header now
    capsys.readouterr()
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert _export(results, "--out", str(afile / "x.pth")) == 2
    assert capsys.readouterr().err == f"semcl: error: --out {afile / 'x.pth'}: {afile} is a file, not a folder\n"
    assert afile.read_text() == "x"
    assert _export(results) == 0 and _export(results) == 2  # the default file too: replaced only with --force
    assert "exists; pass --force" in capsys.readouterr().err
