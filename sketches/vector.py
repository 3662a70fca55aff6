"""Mergeable per-window profile of a vector (embedding) feature.

A :class:`VectorProfile` summarises the vectors ``x`` (dimension ``d``) of one
feature in one window, in a form that merges exactly (counts, sums, bin
counts, the sample) so that replicas and rollups give the single-pass answer:

- ``count`` vectors and ``nulls`` (records without one, or whose vector was dropped);
- ``sum`` of the vectors, in full (``d`` doubles): the mean vector;
- in the projection subspace ``z = P^T x`` (``P`` a ``d x k`` matrix with
  orthonormal columns, from the QR decomposition of a seeded Gaussian matrix,
  ``k = 32``; ``P`` is the identity and ``k = d`` when ``d <= 32``): the sum of
  ``z`` and of ``z z^T`` (the second-moment matrix, ``k x k``), so the
  covariance of the projected vectors is exact;
- the distribution of the norms ``||x||`` (a :class:`~sketches.numeric.NumericSketch`);
- per projection ``j``, exact counts of the direction's coordinate
  ``u_j = z_j / ||x||`` (in ``[-1, 1]``) in :data:`BINS` fixed bins, uniform in
  ``asinh(u / s) / asinh(1 / s)`` with ``s = 0.01`` (fine near 0, where the
  coordinates of high-dimensional directions concentrate);
- a uniform sample of at most :data:`RESERVOIR_SIZE` projected vectors: the
  records whose key (uniform on ``[0, 1)``, drawn independently per record)
  is among the smallest (bottom-k sampling: the union of two samples, cut to
  the smallest keys, is the sample of the union; Cohen & Kaplan 2007).

The seed, ``k`` and a fingerprint of ``P`` are recorded in the profile;
profiles of different projections refuse to merge. Size, 384-d feature, one
window: sum 3 KiB, moments 4.2 KiB, bins 8 KiB, sample 33 KiB (float32
vectors and their keys), norms 1-3 KiB: at most about 50 KiB serialized
before zlib (see ``benchmarks/profile_build.py``).

References
----------
Johnson, W. B., Lindenstrauss, J. (1984). Extensions of Lipschitz mappings into
a Hilbert space. Contemporary Mathematics 26 (random projections keep distances).
Cohen, E., Kaplan, H. (2007). Summarizing data using bottom-k sketches. PODC.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdk.record import NOT_FINITE, VECTOR_DIMENSION, RecordError
from sdk.vectors import BYTES_PER_DIM
from sketches.codec import pack_floats, unpack_floats
from sketches.numeric import NumericSketch

PROJECTION_DIM = 32
"""Dimensions of the projection subspace (vectors of at most this many dimensions are kept whole)."""
PROJECTION_SEED = 20_230_917
"""Seed of the projection matrix of every vector profile (one subspace for the whole fleet)."""
RESERVOIR_SIZE = 256
"""Vectors in the sample."""
BINS = 64
"""Bins per projection of the direction's coordinates."""
BIN_SCALE = 0.01
"""``s`` of the bins' ``asinh(u / s)`` scale."""
_KEY_SALT = b"fleetwatch-vector-sample"


@functools.lru_cache(maxsize=64)
def projection(dim: int, k: int = PROJECTION_DIM, seed: int = PROJECTION_SEED) -> np.ndarray:
    """The ``dim x min(dim, k)`` projection matrix: orthonormal columns, or the identity.

    ``Q`` of the QR decomposition of a ``dim x k`` matrix of independent
    standard normals drawn by ``numpy.random.default_rng(seed)``, each column's
    sign fixed so that ``R`` has a positive diagonal (a uniformly random
    ``k``-frame; Mezzadri 2007). Read-only.

    Examples
    --------
    >>> p = projection(384)
    >>> p.shape, bool(np.allclose(p.T @ p, np.eye(32)))
    ((384, 32), True)
    >>> projection(3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    if dim <= k:
        p = np.eye(dim)
    else:
        q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, k)))
        p = q * np.sign(np.diag(r))
    p.setflags(write=False)
    return p


def fingerprint(p: np.ndarray) -> float:
    """A number that tells projection matrices apart: ``sum_ij P_ij (i + 1) / (j + 1)``, rounded."""
    i = np.arange(1, p.shape[0] + 1)[:, None]
    j = np.arange(1, p.shape[1] + 1)[None, :]
    return round(float((p * i / j).sum()), 6)


def bin_index(u: np.ndarray) -> np.ndarray:
    """Bin of each direction coordinate ``u`` in ``[-1, 1]``: ``floor((asinh(u/s)/asinh(1/s) + 1) B / 2)``,
    clipped to ``[0, B - 1]``.

    Examples
    --------
    >>> bin_index(np.array([-1.0, -0.001, 0.0, 0.001, 1.0])).tolist()
    [0, 31, 32, 32, 63]
    """
    t = np.arcsinh(u * u.dtype.type(1.0 / BIN_SCALE)) * u.dtype.type(BINS / 2 / np.arcsinh(1.0 / BIN_SCALE))
    return np.clip((t + u.dtype.type(BINS / 2)).astype(np.int64), 0, BINS - 1)


def bin_edges() -> np.ndarray:
    """The ``BINS + 1`` edges of the direction bins, from -1 to 1."""
    t = np.linspace(-1.0, 1.0, BINS + 1)
    return BIN_SCALE * np.sinh(t * np.arcsinh(1.0 / BIN_SCALE))


@dataclass(frozen=True, slots=True)
class CleanVectors:
    """A column of vectors as a matrix, with what was dropped.

    Attributes
    ----------
    matrix : numpy.ndarray, shape (m, d), float32
        The valid vectors (read-only: a view of the wire bytes when none was dropped).
    rows : numpy.ndarray, shape (m,), int
        Their record indices.
    dropped : list[tuple[int, RecordError]]
        ``(record index, why)`` of each vector refused (``vector_dimension`` or ``not_finite``).
    """

    matrix: np.ndarray
    rows: np.ndarray
    dropped: list[tuple[int, RecordError]]


def clean_vectors(column: Sequence[bytes | None], name: str, dim: int | None) -> CleanVectors:
    """The valid vectors of a wire column (:mod:`sdk.vectors`): of dimension ``dim`` (else
    that of the first vector) and finite.

    Examples
    --------
    >>> import array
    >>> b = lambda *v: array.array("f", v).tobytes()
    >>> c = clean_vectors([b(1, 2), None, b(1, float("inf")), b(1, 2, 3)], "e", None)
    >>> c.matrix.tolist(), c.rows.tolist(), [e.reason for _i, e in c.dropped]
    ([[1.0, 2.0]], [0], ['not_finite', 'vector_dimension'])
    """
    present = ([i for i, v in enumerate(column) if v is not None] if None in column
               else list(range(len(column))))
    if dim is None and present:
        dim = len(column[present[0]]) // BYTES_PER_DIM
    dropped: list[tuple[int, RecordError]] = []
    width = (dim or 0) * BYTES_PER_DIM
    if present and set(map(len, map(column.__getitem__, present))) != {width}:
        for i in present:
            if len(column[i]) != width:
                dropped.append((i, RecordError(f"features.{name}", f"vector of {len(column[i]) // 4} "
                                               f"dimensions, the feature has {dim}", VECTOR_DIMENSION)))
        present = [i for i in present if len(column[i]) == width]
    if not present:
        return CleanVectors(np.empty((0, dim or 0), np.float32), np.empty(0, np.int64), dropped)
    x = np.frombuffer(b"".join(column[i] for i in present), "<f4").reshape(len(present), dim)
    finite = np.isfinite(x).all(axis=1)
    rows = np.asarray(present, np.int64)
    if not finite.all():
        dropped += [(int(i), RecordError(f"features.{name}", "vector components must be finite", NOT_FINITE))
                    for i in rows[~finite]]
        dropped.sort(key=lambda e: e[0])
        x, rows = x[finite], rows[finite]
    return CleanVectors(x, rows, dropped)


class VectorProfile:
    """Mergeable summary of one vector feature's values in one window (see the module docs).

    Parameters
    ----------
    dim : int
        Dimension of the vectors.
    k : int
        Projection dimensions (``min(dim, k)`` are used).
    seed : int
        Seed of the projection matrix (:func:`projection`).

    Raises
    ------
    ValueError
        If ``dim`` or ``k`` is below 1.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = VectorProfile(384), VectorProfile(384)
    >>> x = rng.standard_normal((600, 384))
    >>> ids = [f"p{i}" for i in range(600)]
    >>> a.update(x[:300], ids[:300]); b.update(x[300:], ids[300:])
    >>> whole = VectorProfile(384); whole.update(x, ids)
    >>> m = a.copy().merge(b)
    >>> m.count, bool(np.allclose(m.mean, x.mean(0))), m.sample.shape
    (600, True, (256, 32))
    >>> VectorProfile.from_dict(m.to_dict()).projected_covariance().shape
    (32, 32)
    """

    def __init__(self, dim: int, k: int = PROJECTION_DIM, seed: int = PROJECTION_SEED) -> None:
        if dim < 1 or k < 1:
            raise ValueError("dim and k must be positive")
        self.dim = dim
        self.seed = seed
        self.p = projection(dim, k, seed)
        self.k = self.p.shape[1]
        self._p32 = self.p.astype(np.float32)
        self._bin_offsets = np.arange(self.k)[None, :] * BINS
        self.count = 0
        self.nulls = 0
        self.sum = np.zeros(dim)
        self.zsum = np.zeros(self.k)
        self.zz = np.zeros((self.k, self.k))
        self.norms = NumericSketch()
        self.bins = np.zeros((self.k, BINS), np.int64)
        self.sample_keys = np.empty(0)
        self.sample = np.empty((0, self.k), np.float32)

    # -- building -------------------------------------------------------------
    def update(self, x: np.ndarray, prediction_ids: Sequence[str]) -> None:
        """Add vectors (finite, shape ``(m, dim)``, float32 or float64) with their records'
        prediction ids.

        One matrix product per call projects the batch (in float32 for float32 input; the
        sums are accumulated in float64). The batch's sample keys are uniform draws of a
        generator seeded by a hash of its first and last prediction ids and the count so
        far: the same records in the same order give the same profile (replicas, replays),
        and different batches independent keys.

        Raises
        ------
        ValueError
            If ``x`` is not ``(m, dim)`` or the ids are not ``m``.
        """
        x = np.asarray(x)
        if x.dtype != np.float32:
            x = x.astype(np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim or len(prediction_ids) != x.shape[0]:
            raise ValueError(f"expected ({len(prediction_ids)}, {self.dim}) vectors, got {x.shape}")
        m = x.shape[0]
        if not m:
            return
        z = x @ (self._p32 if x.dtype == np.float32 else self.p)
        norms = np.sqrt(np.einsum("ij,ij->i", x, x).astype(np.float64))  # (float32 in, float32 sums)
        z64 = z.astype(np.float64)
        self.count += m
        self.sum += x.sum(axis=0, dtype=np.float64)
        self.zsum += z64.sum(axis=0)
        self.zz += z64.T @ z64
        self.norms.update(norms)
        u = z / np.where(norms > 0, norms, 1.0).astype(z.dtype)[:, None]
        flat = bin_index(u) + self._bin_offsets
        self.bins += np.bincount(flat.ravel(), minlength=self.k * BINS).reshape(self.k, BINS)
        self._offer(self._keys(prediction_ids, m), z.astype(np.float32))

    def _keys(self, prediction_ids: Sequence[str], m: int) -> np.ndarray:
        h = hashlib.blake2b(f"{prediction_ids[0]}\x00{prediction_ids[-1]}".encode("utf-8", "surrogatepass"),
                            digest_size=8, key=_KEY_SALT).digest()
        return np.random.default_rng([int.from_bytes(h, "little"), self.count]).random(m)

    def add_nulls(self, n: int) -> None:
        """Count ``n`` records without a vector."""
        self.nulls += n

    def _offer(self, keys: np.ndarray, z: np.ndarray) -> None:
        """Keep the RESERVOIR_SIZE smallest keys of the sample and the candidates."""
        if self.sample_keys.size >= RESERVOIR_SIZE:
            take = keys < self.sample_keys.max()
            keys, z = keys[take], z[take]
            if not keys.size:
                return
        keys = np.concatenate([self.sample_keys, keys])
        z = np.concatenate([self.sample, z])
        order = np.argsort(keys, kind="stable")[:RESERVOIR_SIZE]
        self.sample_keys, self.sample = keys[order], z[order]

    def compatible(self, other: VectorProfile) -> bool:
        """Whether ``other`` has the same dimension and projection (so the two can merge or be compared)."""
        return (self.dim, self.k, self.seed) == (other.dim, other.k, other.seed)

    def merge(self, other: VectorProfile) -> VectorProfile:
        """Merge ``other`` into this profile (in place) and return ``self``.

        Raises
        ------
        ValueError
            If the two differ in dimension or projection.
        """
        if not self.compatible(other):
            raise ValueError(f"vector profiles of different shape or projection: (dim, k, seed) "
                             f"{(self.dim, self.k, self.seed)} and {(other.dim, other.k, other.seed)}")
        self.count += other.count
        self.nulls += other.nulls
        self.sum += other.sum
        self.zsum += other.zsum
        self.zz += other.zz
        self.norms.merge(other.norms)
        self.bins += other.bins
        self._offer(other.sample_keys, other.sample)
        return self

    def copy(self) -> VectorProfile:
        """An independent copy."""
        return VectorProfile.from_dict(self.to_dict())

    # -- reading --------------------------------------------------------------
    @property
    def mean(self) -> np.ndarray:
        """The mean vector, shape ``(dim,)`` (NaN when empty)."""
        return self.sum / self.count if self.count else np.full(self.dim, np.nan)

    @property
    def projected_mean(self) -> np.ndarray:
        """Mean of the projected vectors, shape ``(k,)``."""
        return self.zsum / self.count if self.count else np.full(self.k, np.nan)

    def projected_covariance(self) -> np.ndarray:
        """Unbiased covariance of the projected vectors, ``(zz - n m m^T) / (n - 1)``, shape ``(k, k)``
        (NaN below two vectors)."""
        n = self.count
        if n < 2:
            return np.full((self.k, self.k), np.nan)
        mu = self.zsum / n
        return (self.zz - n * np.outer(mu, mu)) / (n - 1)

    # -- serialisation ----------------------------------------------------------
    def to_dict(self, *, compress: bool = True) -> dict[str, Any]:
        """Plain-data form (little-endian binary arrays); see :meth:`from_dict`."""
        iu = np.triu_indices(self.k)
        return {
            "dim": self.dim, "k": self.k, "seed": self.seed, "fingerprint": fingerprint(self.p),
            "n": self.count, "nulls": self.nulls,
            "sum": pack_floats(self.sum), "zsum": pack_floats(self.zsum), "zz": pack_floats(self.zz[iu]),
            "norms": self.norms.to_dict(compress=compress),
            "bins": np.ascontiguousarray(self.bins, "<u4" if self.bins.max(initial=0) < 2**32 else "<u8"
                                         ).tobytes(),
            "keys": pack_floats(self.sample_keys),
            "sample": np.ascontiguousarray(self.sample, "<f4").tobytes(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VectorProfile:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If the recorded projection is not the one this code builds from its seed.
        """
        p = cls(d["dim"], d["k"], d["seed"])
        if fingerprint(p.p) != d["fingerprint"]:
            raise ValueError(f"vector profile of dimension {d['dim']}: its projection (seed {d['seed']}) "
                             "differs from the one built here")
        p.count, p.nulls = d["n"], d["nulls"]
        p.sum, p.zsum = unpack_floats(d["sum"]), unpack_floats(d["zsum"])
        zz = np.zeros((p.k, p.k))
        zz[np.triu_indices(p.k)] = unpack_floats(d["zz"])
        p.zz = zz + np.triu(zz, 1).T
        p.norms = NumericSketch.from_dict(d["norms"])
        p.bins = np.frombuffer(d["bins"], "<u4" if len(d["bins"]) == 4 * p.k * BINS else "<u8"
                               ).astype(np.int64).reshape(p.k, BINS)
        p.sample_keys = unpack_floats(d["keys"])
        p.sample = np.frombuffer(d["sample"], "<f4").reshape(-1, p.k).copy()
        return p
