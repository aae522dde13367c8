"""Choosing the number of clusters by silhouette (Floe's clustered aggregation): k-means++
(seeded, scikit-learn) on L2-normalised embeddings for M = 2 .. min(max_clusters, N − 1), the M with the
best cosine silhouette; M = 1 when N < 3 or when the best silhouette is below `min_silhouette`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Clustering:
    labels: tuple[int, ...]            # cluster of each row, 0..M−1, numbered by first appearance
    num_clusters: int
    silhouette: float | None           # of the chosen M (None when M = 1 was forced by N < 3)
    tried: dict                        # M -> silhouette


def _renumber(labels) -> tuple[int, ...]:
    order: dict[int, int] = {}
    return tuple(order.setdefault(int(x), len(order)) for x in labels)


def choose_clusters(embeddings, max_clusters: int = 10, min_silhouette: float = 0.25, seed: int = 0) -> Clustering:
    """Cluster the rows of `embeddings` [N, D] (see the module docstring)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    if n < 3:
        return Clustering((0,) * n, 1 if n else 0, None, {})
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    tried, best = {}, None
    for m in range(2, min(max_clusters, n - 1) + 1):
        labels = KMeans(n_clusters=m, init="k-means++", n_init=10, random_state=seed).fit_predict(x)
        if len(set(labels.tolist())) < 2:
            continue
        s = float(silhouette_score(x, labels, metric="cosine"))
        tried[m] = s
        if best is None or s > best[0]:
            best = (s, m, labels)
    if best is None or best[0] < min_silhouette:
        return Clustering((0,) * n, 1, best[0] if best else None, tried)
    return Clustering(_renumber(best[2]), best[1], best[0], tried)


def fixed_clusters(embeddings, num_clusters: int, seed: int = 0) -> Clustering:
    """Exactly min(num_clusters, N) clusters of the rows of `embeddings` (k-means++ on L2-normalised rows, as
    `choose_clusters`; Floe's `experts` option for Fig. 14). The silhouette is reported when 2 ≤ M < N."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    m = min(int(num_clusters), n)
    if m <= 1:
        return Clustering((0,) * n, 1 if n else 0, None, {})
    if m == n:
        return Clustering(tuple(range(n)), n, None, {})
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    labels = _renumber(KMeans(n_clusters=m, init="k-means++", n_init=10, random_state=seed).fit_predict(x))
    k = len(set(labels))
    s = float(silhouette_score(x, labels, metric="cosine")) if 2 <= k < n else None
    return Clustering(labels, k, s, {k: s} if s is not None else {})
