"""The projector's maps: per depth, the points' vectors reduced (PCA), mapped to 2-D or 3-D (PCA, t-SNE or UMAP),
aligned onto the previous depth's map, clustered (k-means, ids matched across depth), and the two "senses separate
with depth" numbers (silhouette, next-word agreement). core.represent.projector picks the points and reads their
vectors; its docstring says why each step is done the way it is.

scikit-learn, scipy and umap-learn are imported inside the functions that use them: they take seconds to load and
only a projection needs them (importing this module, as every page's imports do, should not pay for them).
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from core.base.messages import msg

K_RANGE = (2, 6)  # k-means: the k with the best silhouette at the last depth, in this range
REDUCED = 50  # PCA components everything but the PCA map itself is computed on
SILHOUETTE_SAMPLE = 2_000
AGREEMENT_SAMPLE = 5_000


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, in place (``x`` is a fresh float32 copy: 50k points x 7 depths x 384 is 0.5 GB)."""
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return x


def _reduce(x: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, <= REDUCED) PCA scores of ``x`` and each component's variance share. What k-means, the silhouette, the
    nearest neighbours, t-SNE and UMAP read (the usual step before t-SNE; it makes k-means ~8x faster on 384
    dimensions); its first components are the PCA map itself."""
    from sklearn.decomposition import PCA  # lazy: see the module docstring

    pca = PCA(n_components=min(REDUCED, len(x), x.shape[1]), random_state=seed)
    return pca.fit_transform(x).astype(np.float32), pca.explained_variance_ratio_


def _fit(
    method: str, x: np.ndarray, dims: int, seed: int, ratios: np.ndarray | None = None
) -> tuple[np.ndarray, float | None]:
    """(N, dims) map of the reduced ``x`` (``_reduce``) and, for PCA, the variance share of its components."""
    n = len(x)
    if method == "pca":
        y = x[:, :dims]
        if y.shape[1] < dims:
            y = np.pad(y, ((0, 0), (0, dims - y.shape[1])))
        return y, float(ratios[:dims].sum()) if ratios is not None else None
    if method == "tsne":
        from sklearn.manifold import TSNE  # lazy: see the module docstring

        perplexity = float(min(30.0, max(1.0, (n - 1) / 3)))
        return TSNE(
            n_components=dims, perplexity=perplexity, init="pca", random_state=seed, max_iter=500 if n > 2000 else 1000
        ).fit_transform(x), None
    with warnings.catch_warnings():  # "n_jobs overridden by setting random_state": we want the seed
        warnings.simplefilter("ignore")
        import umap  # lazy: umap-learn loads numba (many seconds); only UMAP maps need it

        return umap.UMAP(
            n_components=dims, n_neighbors=int(min(15, n - 1)), random_state=seed, init="pca", min_dist=0.1
        ).fit_transform(x), None


def _align(y: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """``y`` centred, rotated/reflected onto ``ref`` (orthogonal Procrustes), scaled to unit RMS radius."""
    from scipy.linalg import orthogonal_procrustes  # lazy: see the module docstring

    y = y - y.mean(axis=0)
    if ref is not None:
        r, _ = orthogonal_procrustes(y, ref)
        y = y @ r
    rms = float(np.sqrt((y**2).sum(axis=1).mean()))
    return (y / rms if rms > 0 else y).astype(np.float32)


def _kmeans(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans  # lazy: see the module docstring

    return KMeans(n_clusters=k, n_init=2 if len(x) > 10_000 else 4, random_state=seed).fit_predict(x)


def _choose_k(x: np.ndarray, seed: int) -> int:
    from sklearn.metrics import silhouette_score  # lazy: see the module docstring

    rng = np.random.default_rng(seed)
    xs = x[rng.choice(len(x), SILHOUETTE_SAMPLE, replace=False)] if len(x) > SILHOUETTE_SAMPLE else x
    best, best_s = K_RANGE[0], -2.0
    for k in range(K_RANGE[0], min(K_RANGE[1], len(xs) - 1) + 1):
        labels = _kmeans(xs, k, seed)
        if len(set(labels)) < 2:
            continue
        s = silhouette_score(xs, labels)
        if s > best_s + 1e-9:
            best, best_s = k, s
    return best


def _match(prev: np.ndarray, cur: np.ndarray, k: int) -> np.ndarray:
    """``cur``'s cluster ids renamed to agree most with ``prev`` (Hungarian matching on the contingency table)."""
    from scipy.optimize import linear_sum_assignment  # lazy: see the module docstring

    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (cur, prev), 1)
    rows, cols = linear_sum_assignment(-table)
    rename = np.arange(k)
    rename[rows] = cols
    return rename[cur]


def _silhouette(x: np.ndarray, labels: np.ndarray, seed: int) -> float:
    from sklearn.metrics import silhouette_score  # lazy: see the module docstring

    if len(set(labels.tolist())) < 2:
        return 0.0
    size = SILHOUETTE_SAMPLE if len(x) > SILHOUETTE_SAMPLE else None
    return float(silhouette_score(x, labels, sample_size=size, random_state=seed))


def next_word_agreement(x: np.ndarray, labels: Sequence[str], seed: int = 0) -> tuple[float, float]:
    """(share of points whose nearest other point has the same label, the share two random points would have),
    on at most AGREEMENT_SAMPLE points."""
    from sklearn.neighbors import NearestNeighbors  # lazy: see the module docstring

    lab = np.asarray(labels, dtype=object)
    idx = np.arange(len(x))
    if len(x) > AGREEMENT_SAMPLE:
        idx = np.sort(np.random.default_rng(seed).choice(len(x), AGREEMENT_SAMPLE, replace=False))
    xs, ls = x[idx], lab[idx]
    nn = NearestNeighbors(n_neighbors=2).fit(xs)
    _, nb = nn.kneighbors(xs)
    other = np.where(nb[:, 0] == np.arange(len(xs)), nb[:, 1], nb[:, 0])  # a duplicate may come first
    agree = float(np.mean(ls == ls[other]))
    shares = np.asarray(list(Counter(ls.tolist()).values()), dtype=np.float64) / len(ls)
    return agree, float((shares**2).sum())


def map_threads() -> int:
    """BLAS/OpenMP threads for the maps, k-means and neighbours: $ENCODERLAB_PROJECTOR_THREADS, default 1. On a
    shared 2-core machine (load ~7) 2 threads spin-waited: a 2,000-point sample took 54 s, with 1 thread 9.7 s."""
    raw = os.environ.get("ENCODERLAB_PROJECTOR_THREADS", "").strip()
    return max(1, int(raw)) if raw.isdigit() else 1


def depth_maps(
    x: np.ndarray,
    depths: tuple[int, ...],
    nexts: list[str],
    report: Callable[[float, str], None],
    *,
    method: str,
    dims: int,
    seed: int,
    joint: bool,
) -> dict:
    """Per depth: the ``method`` map in ``dims`` dimensions, clusters and the two separation numbers; the map of all
    depths together when ``joint``. ``x``: (D, N, H) normalised vectors (released here once reduced)."""
    n = x.shape[1]
    D = len(depths)
    steps = D + (1 if joint else 0) + 1
    coords = np.zeros((D, n, dims), dtype=np.float32)
    explained: list[float] = []
    prev = None
    reduced = []
    for i, d in enumerate(depths):
        report(0.5 + 0.45 * i / steps, msg("progress.projector.map_depth", method=method.upper(), depth=d, n=n))
        xr, ratios = _reduce(x[i], seed)
        reduced.append(xr)
        y, ev = _fit(method, xr, dims, seed, ratios)
        coords[i] = prev = _align(y, prev)
        if ev is not None:
            explained.append(ev)
    joint_map = None
    if joint:
        report(0.5 + 0.45 * D / steps, msg("progress.projector.map_joint", method=method.upper(), n=n * D))
        xr, ratios = _reduce(x.reshape(D * n, -1), seed)
        joint_map, _ = _fit(method, xr, dims, seed, ratios)
        joint_map = _align(joint_map, None)
    del x  # released: the reduced vectors are all that is needed below
    report(0.5 + 0.45 * (steps - 1) / steps, msg("progress.projector.clusters"))
    k = _choose_k(reduced[-1], seed)
    clusters = np.zeros((D, n), dtype=np.int16)
    sil, agree = [], []
    chance = 0.0
    for i in range(D):
        c = _kmeans(reduced[i], k, seed)
        clusters[i] = c if i == 0 else _match(clusters[i - 1], c, k)
        sil.append(_silhouette(reduced[i], clusters[i], seed))
        a, chance = next_word_agreement(reduced[i], nexts, seed)
        agree.append(a)
    return dict(
        coords=coords,
        joint=joint_map,
        explained=tuple(explained) if explained else None,
        k=k,
        clusters=clusters,
        silhouette=tuple(sil),
        agreement=tuple(agree),
        agreement_chance=chance,
    )
