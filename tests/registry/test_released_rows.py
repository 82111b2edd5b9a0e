"""Released rows (registry `released:`): the authors' checkpoints with their README numbers, strict like every row:
no training key, a known layout, a network row of the same table; they plan no training runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_table

TABLE = """\
id: tiny/released
paper: gpaco
source: "test"
title: a trained row and the authors' checkpoint of it
seeds: [1]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: CE, method: ce}
  - label: CE (authors checkpoint)
    released: {file: ce.pth, url: "https://example.org/readme", layout: pcl-moco, network: CE}
    reported: {top1: {value: 50.0, provenance: official-readme, source: "README @abc"}}
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    return load_table(path, tmp_path / "presets")


def test_gpaco_imagenet_lt_lists_the_authors_checkpoints_with_the_readme_numbers():
    table = get_table("gpaco/imagenet-lt")
    rel = {r.label: r for r in table.rows if r.released}
    assert {label: r.reported["top1"].value for label, r in rel.items()} == {
        "GPaCo ResNet-50 (authors checkpoint)": 58.5, "GPaCo ResNeXt-50 32x4d (authors checkpoint)": 58.9,
        "GPaCo ResNeXt-101 32x4d (authors checkpoint)": 60.8}
    ck = rel["GPaCo ResNet-50 (authors checkpoint)"].released
    assert (ck.file, ck.layout, ck.network) == ("gpaco_r50_imagenetlt.pth.tar", "pcl-moco",
                                                "GPaCo ResNet-50 (code alpha 0.045)")
    assert all(r.state == "released" for r in rel.values())
    assert not [r for r in plan_runs(table, "smoke") if r.row_label in rel]  # evaluated by `semcl verify` only


def test_the_rince_files_carry_the_sha256_and_size_of_their_git_lfs_pointers():
    ck = get_table("rince/tab2").row("RINCE-out (authors checkpoint)").released
    assert ck.sha256 == "cc36ce15b87e4fec37f98af5e5cdd11b851bf86609de248e4c4e6ef9ed3e80cb" and ck.size == 223977279


def test_a_released_row_loads(tmp_path):
    table = _load(tmp_path, TABLE)
    assert table.row("CE (authors checkpoint)").released.network == "CE"


@pytest.mark.parametrize("old, new, message", [
    ("network: CE}", "network: CE}\n    method: ce", "key 'released' excludes key 'method'"),
    ("network: CE}", "network: CE}\n    overrides: {optim.lr: 0.1}", "key 'released' excludes key 'overrides'"),
    ("network: CE}", "network: CE}\n    teacher: CE", "key 'released' excludes key 'teacher'"),
    ("network: CE}", "network: CE, epochs: 3}", "epochs"),
    ("layout: pcl-moco", "layout: moco", "'released.layout' = 'moco' is no known layout"),
    ("network: CE}", "network: CE b}", "'released.network' = 'CE b' names no trained row"),
    ("network: CE}", "network: CE, sha256: abc}", "'rows[1].released.sha256' = 'abc' is not 64 lower-case hex"),
    ("file: ce.pth", "file: ../ce.pth", "'rows[1].released.file'"),
    ("network: CE}", "network: CE, size: -1}", "size"),
])
def test_a_bad_released_row_is_one_line_naming_the_file_and_key(tmp_path, old, new, message):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, TABLE.replace(old, new, 1))
    assert message in str(err.value) and "tiny.yaml" in str(err.value) and "\n" not in str(err.value)
