"""Point ids, vectors and records, built and read the same way by both backends."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from automem.vectors.protocol import DENSE, SPARSE, DimensionMismatchError, VectorPoint

__all__ = ["canonical_id", "check_dim", "dense", "point_vectors", "read_point", "sparse_pair"]


def canonical_id(value: str | uuid.UUID) -> str:
    """Canonical lower-case UUID string; ``ValueError`` if ``value`` is not a UUID."""
    if isinstance(value, uuid.UUID):
        return str(value)
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError(f"vector point id must be a UUID string, got {value!r}") from None


def check_dim(collection: str, expected: int | None, got: int) -> None:
    """:class:`DimensionMismatchError` when the collection's size ``expected`` is known and
    differs from ``got``."""
    if expected is not None and expected != got:
        raise DimensionMismatchError(collection, expected, got)


def dense(vector: Sequence[float]) -> list[float]:
    """``vector`` as floats, L2-normalised (cosine ignores length; a zero vector is kept)."""
    vec = [float(x) for x in vector]
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm > 0.0 else vec


def sparse_pair(indices: Sequence[int], values: Sequence[float]) -> tuple[list[int], list[float]]:
    """``(indices, values)`` as ints and floats; ValueError when their lengths differ."""
    idx = [int(i) for i in indices]
    val = [float(v) for v in values]
    if len(idx) != len(val):
        raise ValueError(f"sparse vector has {len(idx)} indices but {len(val)} values")
    return idx, val


def point_vectors(vec: list[float], sparse: tuple[Sequence[int], Sequence[float]] | None,
                  make_sparse: Callable[[list[int], list[float]], Any]) -> dict[str, Any]:
    """The named vectors of one point: ``{DENSE: vec}`` (``vec`` from :func:`dense`) plus
    ``{SPARSE: make_sparse(indices, values)}`` when ``sparse`` has at least one term
    (``make_sparse`` is the backend library's sparse-vector constructor). ValueError from
    :func:`sparse_pair`."""
    vectors: dict[str, Any] = {DENSE: vec}
    if sparse is not None:
        idx, val = sparse_pair(*sparse)
        if idx:
            vectors[SPARSE] = make_sparse(idx, val)
    return vectors


def read_point(rec: Any, ident: Callable[[Any], str] = str) -> VectorPoint:
    """The :class:`VectorPoint` of a record returned by either library (``id``, ``payload``
    and ``vector``: a dict of named vectors, the sparse one with ``indices``/``values``);
    ``ident`` turns the record's id into the point id."""
    vec = rec.vector if isinstance(rec.vector, dict) else {}
    dense_vec = vec.get(DENSE)
    sp = vec.get(SPARSE)
    return VectorPoint(
        id=ident(rec.id),
        payload=dict(rec.payload or {}),
        vector=[float(x) for x in dense_vec] if dense_vec is not None else None,
        sparse=(list(sp.indices), [float(v) for v in sp.values]) if sp is not None else None,
    )
