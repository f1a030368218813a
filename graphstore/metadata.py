"""Metadata rules shared by every backend: what may be stored, and what a filter sees of it.

Metadata is JSON (so an int stays an int and a list stays a list).  A filter
(`graphstore.filters`) sees a node's metadata as *filter pairs* `(key, value)`: every scalar
and dict under its key, dotted keys reaching into nested dicts, and each element of a list
under the list's key.  Both backends keep the same pairs as *filter terms* (JSON strings), so
a filter means exactly the same thing in memory and in Cassandra.

Limits, checked before anything is written (and on filters): containers nest at most
`MAX_DEPTH` levels (deeper JSON overflows the recursion of the code that encodes and indexes
it), integers have at most `MAX_INT_DIGITS` digits (Python will not print longer ones), and
every string and key is valid UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from graphstore.errors import InvalidInputError
from graphstore.utf8 import check_utf8

Filter = Mapping[str, Any]
"""A metadata filter as callers write it (`graphstore.filters` parses it)."""
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
    check_json(metadata, "metadata")
    return dict(metadata)


def check_json(value: Any, path: str, depth: int = 0) -> None:
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
            check_json(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{path} has a non-string key {key!r}")
            check_utf8(f"a key of {path}", key)
            check_json(item, f"{path}.{key}", depth + 1)
        return
    raise InvalidInputError(f"{path} is a {_type_name(value)}, which the store cannot keep")


def _type_name(value: Any) -> str:
    """The type of a value the store refuses, with its module when not a built-in: a NumPy
    bool was refused as "a bool", which is what the store keeps."""
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__name__
    convert = ".tolist()" if kind.__name__ == "ndarray" else ".item()"
    hint = f" (convert it with {convert})" if kind.__module__ == "numpy" else ""
    return f"{kind.__module__}.{kind.__qualname__}{hint}"


def canonical(value: Any) -> Any:
    """A filter value as filters compare it: 2 and 2.0 are the same number (also inside
    dicts and their lists); True and 1 are not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return value


def term(key: str, value: Any) -> str:
    """The filter term of one `(key, value)` pair (value canonical)."""
    return json.dumps([key, value], ensure_ascii=False, sort_keys=True)


def filter_pairs(metadata: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The `(key, value)` pairs a filter sees, values canonical.

    Scalars and list elements (scalars or dicts) under their key; a nested dict both as a
    whole and, recursively, under dotted keys (`{"nested": {"a": 5}}` has `nested.a = 5`),
    a dict in a list too, as MongoDB reads a list of documents (`{"tags": [{"a": 5}]}` has
    `tags.a = 5`).
    """
    for key, value in metadata.items():
        path = prefix + key
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if isinstance(item, (*SCALARS, Mapping)):
                yield path, canonical(item)
            if isinstance(item, Mapping):
                yield from filter_pairs(item, path + ".")


def filter_terms(metadata: Mapping[str, Any]) -> frozenset[str]:
    """The terms a node can be filtered on: its filter pairs as strings."""
    return frozenset(term(key, value) for key, value in filter_pairs(metadata))
