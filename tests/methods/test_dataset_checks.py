"""A method setting the dataset cannot serve fails when the registry loads (MethodSpec.check_dataset)."""

from __future__ import annotations

import pytest

from semcl.errors import ConfigError
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_table

ENTRY = """
id: test/k
paper: scns
source: test
title: SCNS-class top-k against the class count
seeds: [1]
columns:
  - {key: top1, eval: linear_probe, label: "Top-1"}
rows:
  - {label: SCNS-class, method: scns_supcon, overrides: {method.negatives: class, method.k: K}}
profiles:
  paper: {overrides: {data.name: cifar10}}
  smoke: {overrides: {data.name: cifar10, data.synthetic: true}}
"""


def _load(tmp_path, k):
    path = tmp_path / "k.yaml"
    path.write_text(ENTRY.replace("K}", f"{k}}}"))
    return load_table(path, tmp_path)


def test_top_k_beyond_the_other_classes_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, 10)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path / 'k.yaml'}: row 'SCNS-class', profile ")
    assert "'method.k' = 10: SCNS-class needs 1 <= k <= 9" in msg and "cifar10" in msg and "10 classes" in msg


def test_nine_of_ten_classes_loads(tmp_path):
    table = _load(tmp_path, 9)
    assert table.resolve(table.rows[0], "smoke").method.k == 9


def test_uniform_negatives_do_not_read_k(tmp_path):
    path = tmp_path / "u.yaml"
    path.write_text(ENTRY.replace("method.negatives: class, method.k: K", "method.negatives: uniform, method.k: 50"))
    load_table(path, tmp_path)


@pytest.mark.parametrize("profile", ["paper", "mini", "smoke"])
def test_sup_cifar10_plans_ten_classes_and_a_valid_k_at_every_profile(profile):
    runs = plan_runs(get_table("scns/sup-cifar10"), profile)
    names = {r.config.data.name for r in runs}
    assert names == ({"fashion_mnist"} if profile == "mini" else {"cifar10"})
    class_rows = [r for r in runs if r.config.method.name == "scns_supcon" and r.config.method.negatives == "class"]
    assert class_rows and {r.config.method.k for r in class_rows} == {5, 9}
