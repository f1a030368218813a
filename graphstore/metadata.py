"""Metadata rules shared by every backend: what may be stored, and how filters match.

Metadata is JSON (so an int stays an int and a list stays a list).  Filters are equality
conditions, ANDed, on keys (dotted keys reach into nested dicts); a list value matches when it
contains the filter value, which may itself be a dict.
Both backends compare the same *filter terms*, strings made from `(key, value)` pairs, so a
filter means exactly the same thing in memory and in Cassandra.

Limits, checked before anything is written (and on filters): containers nest at most
`MAX_DEPTH` levels (deeper JSON overflows the recursion of the code that encodes and indexes
it), integers have at most `MAX_INT_DIGITS` digits (Python will not print longer ones), and
every string and key is valid UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from graphstore.errors import InvalidInputError
from graphstore.utf8 import check_utf8

Filter = Mapping[str, Any]
Scalar = str | int | float | bool
SCALARS = (str, int, float, bool)
MAX_DEPTH = 32
"""Deepest nesting of lists and dicts inside one metadata value or filter value."""
MAX_INT_DIGITS = 4300
"""Most digits of an integer in metadata or a filter (Python's int-to-text limit)."""
_INT_LIMIT = 10**MAX_INT_DIGITS


def check_metadata(metadata: Any) -> dict[str, Any]:
    """Return `metadata` as a plain dict, or raise if it is not storable JSON."""
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a dict, not {type(metadata).__name__}")
    _check_json(metadata, "metadata")
    return dict(metadata)


def _check_json(value: Any, path: str, depth: int = 0) -> None:
    if isinstance(value, str):
        check_utf8(path, value)
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise InvalidInputError(
                f"{path} is an integer of more than {MAX_INT_DIGITS} digits; the limit is "
                f"{MAX_INT_DIGITS}"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{path} is {value}, which JSON cannot store")
        return
    if isinstance(value, (list, tuple, Mapping)) and depth >= MAX_DEPTH:
        raise InvalidInputError(
            f"{path} nests deeper than {MAX_DEPTH} levels; the limit is {MAX_DEPTH}"
        )
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{path} has a non-string key {key!r}")
            check_utf8(f"a key of {path}", key)
            _check_json(item, f"{path}.{key}", depth + 1)
        return
    raise InvalidInputError(f"{path} is a {type(value).__name__}, which the store cannot keep")


def _canonical(value: Any) -> Any:
    # 2 and 2.0 are the same number to a filter (also inside dicts); True and 1 are not.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _canonical(item) for key, item in value.items()}
    return value


def _term(key: str, value: Any) -> str:
    return json.dumps([key, _canonical(value)], ensure_ascii=False, sort_keys=True)


def filter_terms(metadata: Mapping[str, Any], prefix: str = "") -> frozenset[str]:
    """The terms a node can be filtered on.

    Scalars and list elements (scalars or dicts) under their key; a nested dict both as a
    whole and, recursively, under dotted keys (`{"nested": {"a": 5}}` matches `nested.a = 5`).
    """
    terms: set[str] = set()
    for key, value in metadata.items():
        path = prefix + key
        if isinstance(value, (*SCALARS, Mapping)):
            terms.add(_term(path, value))
        if isinstance(value, Mapping):
            terms |= filter_terms(value, path + ".")
        elif isinstance(value, (list, tuple)):
            terms.update(
                _term(path, item) for item in value if isinstance(item, (*SCALARS, Mapping))
            )
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
        check_utf8("a filter key", key)
        if not isinstance(value, (*SCALARS, Mapping)):
            raise InvalidInputError(
                f"filter value for {key!r} must be a string, number, bool or dict, "
                f"not {type(value).__name__}"
            )
        _check_json(value, f"filter value for {key!r}")
    return frozenset(_term(key, value) for key, value in metadata_filter.items())
