"""A NumPy codec for the driver's `vector<float, n>` columns: one call per vector, not n.

cassandra-driver 3.30 encodes and decodes a vector one element at a time: about 150 µs for
a 384-float vector on this project's machine.  A traversal reads ~10 tag rows per tag, each
with its node's embedding: with this codec the median depth-1 traversal of
`benchmarks/traversal_time.py` on Cassandra fell from 35 ms to 14.5 ms (MMR: 62 to 39 ms).
A write encodes one vector per tag row.

`install()` replaces `VectorType.deserialize` and `.serialize` for float vectors only, in
this process: decoding still returns a list of Python floats, equal to the driver's
(`tests/test_cassandra.py` checks), so other users of the driver see the same values; the
encoder's fast path takes float32 NumPy arrays (what graphstore binds) and passes every
other value to the driver's own code, errors included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from cassandra.cqltypes import FloatType, VectorType

BIG_ENDIAN_FLOAT = np.dtype(">f4")


def _fast_deserialize(cls: Any, byts: bytes, protocol_version: int) -> Any:
    if cls.subtype is FloatType and len(byts) == 4 * cls.vector_size:
        return np.frombuffer(byts, dtype=BIG_ENDIAN_FLOAT).tolist()
    return _DRIVER_DESERIALIZE(cls, byts, protocol_version)


def _fast_serialize(cls: Any, value: Any, protocol_version: int) -> bytes:
    if (
        cls.subtype is FloatType
        and isinstance(value, np.ndarray)
        and value.dtype == np.float32
        and value.shape == (cls.vector_size,)
    ):
        return value.astype(BIG_ENDIAN_FLOAT).tobytes()
    encoded: bytes = _DRIVER_SERIALIZE(cls, value, protocol_version)
    return encoded


_DRIVER_DESERIALIZE = VectorType.deserialize.__func__
_DRIVER_SERIALIZE = VectorType.serialize.__func__


def install() -> None:
    """Use the NumPy codec for float vectors from now on (idempotent)."""
    VectorType.deserialize = classmethod(_fast_deserialize)
    VectorType.serialize = classmethod(_fast_serialize)
