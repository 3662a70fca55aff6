"""Versioned byte encoding of profiles: magic, format version, compressed MessagePack.

Layout: ``b"FWP"``, one byte of format version, then the Zstandard frame (RFC 8878;
formats 2 to 5: the zlib stream, RFC 1950) of the MessagePack document. Sketch
payloads (t-digest centroid arrays, DataSketches serialisations) are little-endian
binary inside MessagePack ``bin`` fields; the compressor removes most of their
redundancy (integral counters stored as doubles, repeated high bytes of
neighbouring centroids).

Zstandard replaced zlib because it is both faster and not larger on profiles:
on a 20-feature window of the ingest benchmark's data at 500, 1,500 and 2,500
records, level 6 gives 50.5 / 139.8 / 76.5 KB where zlib level 6 gave 51.0 /
142.0 / 79.3 KB, in 1.5 / 4.4 / 5.4 ms instead of 2.7 / 13.5 / 12.8 ms (level 9
is 0.2 % smaller and 1.5-2x slower). Level 3 (:data:`LEVEL`, every profile
since) gives 51.7 / 141.9 / 79.1 KB, smaller than zlib level 1 (52.9 / 149.8 /
86.4 KB), in a third to a sixth of level 6's time: on the ingest benchmark's
2,500-record windows, 0.8 % (values repeated 5 times) to 3.7 % (every value
distinct) more bytes than level 6 for 0.3 µs less per record aggregated, a
twentieth of the aggregator's whole cost per record.

Format history
--------------
1. Plain MessagePack with ``"fmt": 1``; DataSketches t-digest and HLL. No longer read.
2. This layout; t-digest with centroid extents, CPC distinct counts, slices. Still read.
3. Numeric sketches may hold ``raw`` (up to ``MAX_EXACT_VALUES`` values kept
   exactly, in place of the digest) and ``bins`` (exact counts in the bin
   edges derived from the model's reference, with the edges' version). A
   format-2 document is a format-3 document without either.
4. A window profile may hold ``mv``: the co-moments of its numeric features
   (:mod:`sketches.comoments`; names, complete rows, excluded rows, the mean
   vector and the upper triangle of the scatter matrix as packed doubles). A
   format-3 document is a format-4 document without it: such a profile has no
   co-moments (a reference uploaded before format 4 runs no multivariate test
   until it is uploaded again).
5. Window profiles may hold ``vectors``: per vector feature, a
   :class:`sketches.vector.VectorProfile` (dimension, projection seed and
   fingerprint, count, nulls, sum, projected moments, norms, direction bins,
   sample). A format-4 document is a format-5 document without them.
6. The MessagePack document is compressed with Zstandard instead of zlib, and a
   t-digest written for a checkpoint (``to_dict(compress=False)``) may hold
   ``buf``: its buffered values, packed doubles, read back into its buffer. A
   format-5 document is a format-6 document without ``buf``.
"""

from __future__ import annotations

import zlib
from typing import Any

import cramjam
import msgpack
import numpy as np

PROFILE_FORMAT_VERSION = 6
READABLE_FORMAT_VERSIONS = frozenset({2, 3, 4, 5, 6})
ZLIB_FORMAT_VERSIONS = frozenset({2, 3, 4, 5})
"""Formats whose document is a zlib stream (the later ones: a Zstandard frame)."""
MAGIC = b"FWP"
LEVEL = 3
"""Zstandard level of every profile written to be kept (closed windows, references, rollups)."""
CHECKPOINT_LEVEL = -1
"""Zstandard level of the aggregator's checkpoints of open windows (``WindowProfile.to_bytes(fast=True)``):
state rewritten every interval and kept until the window closes, mostly buffered values. A fast
(negative) level halves their compression, with as many bytes on real data. 2,500-record
windows, level 3 against -1: the demo's NYC flights (12 features) 0.127 → 0.060 ms, 37.3 → 37.1
KB; 20 features of distinct values 0.50 → 0.26 ms, 155.8 → 157.6 KB; the ingest benchmark's
workload, whose 500 records repeat 5 times (repeats level 3 finds), 1.06 → 0.43 ms, 71 → 141 KB
(docs/profiles.md, "Ingest")."""


def shuffle8(data: bytes) -> bytes:
    """Byte-plane shuffle of 8-byte words: all first bytes, then all second bytes, ...

    Neighbouring doubles share sign, exponent and leading mantissa bytes; laid
    out plane by plane those bytes form long runs that zlib compresses to
    almost nothing (the "shuffle" filter of Blosc/HDF5).

    Raises
    ------
    ValueError
        If ``len(data)`` is not a multiple of 8.

    Examples
    --------
    >>> list(shuffle8(bytes(range(16))))
    [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]
    >>> unshuffle8(shuffle8(bytes(range(16)))) == bytes(range(16))
    True
    """
    if len(data) % 8:
        raise ValueError("length must be a multiple of 8")
    return np.frombuffer(data, np.uint8).reshape(-1, 8).T.tobytes()


def unshuffle8(data: bytes) -> bytes:
    """Inverse of :func:`shuffle8`."""
    if len(data) % 8:
        raise ValueError("length must be a multiple of 8")
    return np.frombuffer(data, np.uint8).reshape(8, -1).T.tobytes()


def pack_floats(values: np.ndarray) -> bytes:
    """float64 array -> shuffled little-endian bytes (see :func:`shuffle8`)."""
    return shuffle8(np.ascontiguousarray(values, "<f8").tobytes())


def unpack_floats(data: bytes) -> np.ndarray:
    """Inverse of :func:`pack_floats` (a new, writable array)."""
    return np.frombuffer(unshuffle8(data), "<f8").astype(np.float64)


def encode(document: dict[str, Any], level: int = LEVEL) -> bytes:
    """Bytes of ``document`` in the current format, compressed at Zstandard ``level``
    (1-22; any level reads back with :func:`decode`).

    Examples
    --------
    >>> decode(encode({"n": 3})), decode(encode({"n": 3}, level=19))
    ({'n': 3}, {'n': 3})
    """
    body = msgpack.packb(document, use_bin_type=True)
    return MAGIC + bytes([PROFILE_FORMAT_VERSION]) + bytes(cramjam.zstd.compress(body, level=level))


def decode(data: bytes) -> dict[str, Any]:
    """Inverse of :func:`encode`.

    Raises
    ------
    ValueError
        If ``data`` is not a profile of a known format version.
    """
    if data[:3] != MAGIC or len(data) < 4:
        raise ValueError("not a fleetwatch profile (format 1 profiles are no longer read)")
    if data[3] not in READABLE_FORMAT_VERSIONS:
        raise ValueError(f"unknown profile format {data[3]}")
    try:
        body = (zlib.decompress(data[4:]) if data[3] in ZLIB_FORMAT_VERSIONS
                else cramjam.zstd.decompress(data[4:]))
        document = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except (zlib.error, cramjam.DecompressionError, ValueError) as exc:
        raise ValueError(f"corrupt profile: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("corrupt profile: not a map")
    return document
