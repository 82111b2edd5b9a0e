"""Weighted k-nearest-neighbour classification on frozen features (InstDisc / DINO protocol).

Wu et al. 2018 (InstDisc) and Caron et al. 2021 (DINO, `eval_knn.py`): both feature sets are
L2-normalised; for a test feature q the k training features with the largest cosine similarity
s_i = <q, x_i> vote for their classes with weight exp(s_i / T):

    score_c(q) = sum_{i in topk(q)} exp(s_i / T) [y_i = c],      prediction = argmax_c score_c(q)

T = 0.07, k in {20, 200} (the two values both papers report). Ties in the class score go to the
lowest class index (torch.argmax); ties in similarity at the k-th neighbour are broken by
torch.topk. A k larger than the training set uses every training image (tiny smoke sets).
The test set is processed in chunks, so the similarity matrix held at once is
[chunk_size, N_train] in the features' dtype (float64 stays float64, anything else float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from semcl.evals._inputs import feature_matrix

DEFAULT_KS = (20, 200)
DEFAULT_TEMPERATURE = 0.07


def _labels(y, n: int, name: str) -> torch.Tensor:
    t = torch.as_tensor(y)
    if t.ndim != 1 or t.shape[0] != n or t.dtype in (torch.float16, torch.float32, torch.float64, torch.bool):
        raise ValueError(f"{name} must be an integer vector of length {n}, got {t.dtype} {tuple(t.shape)}")
    if bool((t < 0).any()):
        raise ValueError(f"{name} holds a negative label")
    return t.long()


def knn_predict(train_features, train_labels, test_features, ks: Sequence[int] = DEFAULT_KS,
                temperature: float = DEFAULT_TEMPERATURE, *, num_classes: int | None = None,
                chunk_size: int = 256) -> dict[int, torch.Tensor]:
    """Predicted class of every test feature for each k (module docstring): {k: int64 [N_test]}."""
    db = feature_matrix(train_features, "train_features")
    q = feature_matrix(test_features, "test_features")
    if q.shape[1] != db.shape[1]:
        raise ValueError(f"test features have {q.shape[1]} dims but train features have {db.shape[1]}")
    y = _labels(train_labels, db.shape[0], "train_labels")
    ks = tuple(ks)
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"ks must be a non-empty sequence of positive ints, got {ks!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    classes = int(y.max()) + 1 if num_classes is None else num_classes
    if int(y.max()) >= classes:
        raise ValueError(f"train_labels hold class {int(y.max())} but num_classes is {classes}")
    dtype = torch.promote_types(db.dtype, q.dtype)
    db = torch.nn.functional.normalize(db.to(dtype), dim=1)
    q = torch.nn.functional.normalize(q.to(dtype), dim=1)
    kmax = min(max(ks), db.shape[0])
    preds = {k: torch.empty(q.shape[0], dtype=torch.long) for k in ks}
    for start in range(0, q.shape[0], chunk_size):
        sims = q[start:start + chunk_size] @ db.T  # [chunk, N_train]
        top_s, top_i = sims.topk(kmax, dim=1)  # sorted, most similar first
        weights = (top_s / temperature).exp()
        votes = y[top_i]
        for k in ks:
            kk = min(k, kmax)
            scores = torch.zeros(top_s.shape[0], classes, dtype=dtype)
            scores.scatter_add_(1, votes[:, :kk], weights[:, :kk])
            preds[k][start:start + top_s.shape[0]] = scores.argmax(dim=1)
    return preds


def knn_accuracy(train_features, train_labels, test_features, test_labels, ks: Sequence[int] = DEFAULT_KS,
                 temperature: float = DEFAULT_TEMPERATURE, *, num_classes: int | None = None,
                 chunk_size: int = 256) -> dict[int, float]:
    """Top-1 accuracy in [0, 1] of the weighted k-NN classifier for each k: {k: accuracy}."""
    n = torch.as_tensor(test_features).shape[0]
    truth = _labels(test_labels, n, "test_labels")
    preds = knn_predict(train_features, train_labels, test_features, ks, temperature,
                        num_classes=num_classes, chunk_size=chunk_size)
    return {k: float((p == truth).double().mean()) for k, p in preds.items()}
