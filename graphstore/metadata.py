"""Metadata rules shared by every backend: what may be stored, and how filters match.

Metadata is JSON (so an int stays an int and a list stays a list).  Filters are equality
conditions on top-level keys, ANDed; a list value matches when it contains the filter value.
Both backends compare the same *filter terms*, strings made from `(key, value)` pairs, so a
filter means exactly the same thing in memory and in Cassandra.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from graphstore.errors import InvalidInputError

Filter = Mapping[str, Any]
Scalar = str | int | float | bool
SCALARS = (str, int, float, bool)


def check_metadata(metadata: Any) -> dict[str, Any]:
    """Return `metadata` as a plain dict, or raise if it is not storable JSON."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a dict, not {type(metadata).__name__}")
    _check_json(metadata, "metadata")
    return dict(metadata)


def _check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{path} is {value}, which JSON cannot store")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{path} has a non-string key {key!r}")
            _check_json(item, f"{path}.{key}")
        return
    raise InvalidInputError(f"{path} is a {type(value).__name__}, which the store cannot keep")


def _term(key: str, value: Scalar) -> str:
    # 2 and 2.0 are the same number to a filter; True and 1 are not.
    if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
        value = int(value)
    return json.dumps([key, value], ensure_ascii=False)


def filter_terms(metadata: Mapping[str, Any]) -> frozenset[str]:
    """The terms a node can be filtered on: its top-level scalars and list elements."""
    terms: set[str] = set()
    for key, value in metadata.items():
        if isinstance(value, SCALARS):
            terms.add(_term(key, value))
        elif isinstance(value, (list, tuple)):
            terms.update(_term(key, item) for item in value if isinstance(item, SCALARS))
    return frozenset(terms)


def required_terms(metadata_filter: Filter | None) -> frozenset[str]:
    """The terms a node must have to pass `metadata_filter`; raise on a malformed filter."""
    if metadata_filter is None:
        return frozenset()
    if not isinstance(metadata_filter, Mapping):
        raise InvalidInputError(f"filter must be a dict, not {type(metadata_filter).__name__}")
    for key, value in metadata_filter.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"filter keys must be non-empty strings, got {key!r}")
        if not isinstance(value, SCALARS) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise InvalidInputError(
                f"filter value for {key!r} must be a string, number or bool, "
                f"not {type(value).__name__}"
            )
    return frozenset(_term(key, value) for key, value in metadata_filter.items())
