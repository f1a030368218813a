"""Metadata filters: the dict LangChain-style vector stores accept, parsed once into a small
expression tree that every backend evaluates with the same meaning.

    {"book": "西游记"}                            equality, as always
    {"chapter": {"$lte": 27}, "book": "西游记"}    several keys: all must hold
    {"chapter": {"$gte": 3, "$lt": 10}}          several operators: all must hold
    {"$or": [{"book": "a"}, {"chapter": {"$in": [1, 2]}}]}

Operators `$eq $ne $in $nin $lt $lte $gt $gte`; `$and` and `$or` take a non-empty list of
filters.  The meaning (`matches` is the reference every backend is tested against):

- A key's values are the filter pairs of `graphstore.metadata`: the value under the key, or
  each element of a list under it; a dotted key reaches into nested dicts, those in a list
  too (as MongoDB's does).
- `$eq`: one of the key's values equals the operand.  Numbers compare by value (2 equals
  2.0), a bool is not a number (True is not 1), a number never equals a string (27 is not
  "27"), and a dict operand equals a dict value with the same content.
- `$in`: `$eq` for one of the listed operands (`$in: []` matches nothing).
- `$ne` and `$nin` are the negations of `$eq` and `$in`: a passage *without* the key matches
  them (as in Chroma since 0.5.12, MongoDB and Astra DB).
- `$lt $lte $gt $gte`: one of the key's values of the operand's type compares as asked,
  numbers with numbers and strings with strings (by code point, which is the byte order of
  UTF-8).  A value of another type never matches, nor does a missing key.  Dates are ISO 8601
  strings and compare as strings: chronologically when they are written in one form and one
  time zone (`2024-05-01`, or `2024-05-01T12:00:00Z` throughout).

A malformed filter is refused with a one-line `InvalidInputError` before anything runs.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphstore.errors import InvalidInputError
from graphstore.metadata import (
    MAX_DEPTH,
    SCALARS,
    canonical,
    check_json,
    filter_pairs,
    term,
)
from graphstore.utf8 import check_utf8

RANGE_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$lt": operator.lt,
    "$lte": operator.le,
    "$gt": operator.gt,
    "$gte": operator.ge,
}
OPERATORS = ("$eq", "$ne", "$in", "$nin", *RANGE_OPERATORS)
LOGICAL = ("$and", "$or")
Number = int | float
Orderable = int | float | str


@dataclass(frozen=True)
class Equals:
    """One of the key's values equals `value` (canonical); `term` is that pair's filter term."""

    key: str
    term: str
    value: Any = field(compare=False)


@dataclass(frozen=True)
class Compare:
    """One of the key's values of the operand's type is `operator` (`$lt` …) `value`."""

    key: str
    operator: str
    value: Orderable

    @property
    def is_number(self) -> bool:
        return not isinstance(self.value, str)


@dataclass(frozen=True)
class Not:
    condition: Condition


@dataclass(frozen=True)
class AllOf:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf:
    conditions: tuple[Condition, ...]


Condition = Equals | Compare | Not | AllOf | AnyOf
EVERYTHING = AllOf(())
"""The condition of no filter: every node passes."""


@dataclass(frozen=True)
class FilterValues:
    """What a filter sees of one node: its filter terms, and its number and string values
    by key (for the range operators)."""

    terms: frozenset[str]
    numbers: Mapping[str, tuple[Number, ...]]
    strings: Mapping[str, tuple[str, ...]]

    @classmethod
    def of_pairs(cls, pairs: Iterable[tuple[str, Any]]) -> FilterValues:
        terms: set[str] = set()
        numbers: dict[str, list[Number]] = {}
        strings: dict[str, list[str]] = {}
        for key, value in pairs:
            terms.add(term(key, value))
            if isinstance(value, str):
                strings.setdefault(key, []).append(value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                numbers.setdefault(key, []).append(value)
        return cls(
            frozenset(terms),
            {key: tuple(values) for key, values in numbers.items()},
            {key: tuple(values) for key, values in strings.items()},
        )

    @classmethod
    def of_metadata(cls, metadata: Mapping[str, Any]) -> FilterValues:
        return cls.of_pairs(filter_pairs(metadata))

    @classmethod
    def of_terms(cls, terms: Iterable[str]) -> FilterValues:
        """From stored filter terms (a Cassandra row carries them, not the metadata)."""
        return cls.of_pairs(tuple(json.loads(item)) for item in terms)

    def of_type(self, compare: Compare) -> tuple[Orderable, ...]:
        """The key's values a range condition compares with."""
        found = self.numbers if compare.is_number else self.strings
        return found.get(compare.key, ())


def holds(condition: Condition, values: FilterValues) -> bool:
    """Whether a node with these filter values passes `condition`."""
    if isinstance(condition, Equals):
        return condition.term in values.terms
    if isinstance(condition, Compare):
        test = RANGE_OPERATORS[condition.operator]
        return any(test(value, condition.value) for value in values.of_type(condition))
    if isinstance(condition, Not):
        return not holds(condition.condition, values)
    if isinstance(condition, AllOf):
        return all(holds(part, values) for part in condition.conditions)
    return any(holds(part, values) for part in condition.conditions)


def matches(condition: Condition, metadata: Mapping[str, Any]) -> bool:
    """The reference semantics: whether a node with `metadata` passes `condition`."""
    return holds(condition, FilterValues.of_metadata(metadata))


def parse_filter(raw: Any) -> Condition:
    """A filter dict (or None: no filter) as a condition; a one-line error if malformed."""
    if raw is None:
        return EVERYTHING
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"filter must be a dict, not {type(raw).__name__}")
    return _parse(raw, 0)


def all_of(parts: Iterable[Condition]) -> Condition:
    """The conjunction of `parts`, flattened (one part is itself)."""
    flat: list[Condition] = []
    for part in parts:
        flat.extend(part.conditions if isinstance(part, AllOf) else (part,))
    return flat[0] if len(flat) == 1 else AllOf(tuple(dict.fromkeys(flat)))


def any_of(parts: Iterable[Condition]) -> Condition:
    """The disjunction of `parts`, flattened (one part is itself; none: nothing passes)."""
    flat: list[Condition] = []
    for part in parts:
        flat.extend(part.conditions if isinstance(part, AnyOf) else (part,))
    return flat[0] if len(flat) == 1 else AnyOf(tuple(dict.fromkeys(flat)))


def _parse(raw: Mapping[Any, Any], depth: int) -> Condition:
    if depth > MAX_DEPTH:
        raise InvalidInputError(
            f"filter nests deeper than {MAX_DEPTH} levels; the limit is {MAX_DEPTH}"
        )
    parts: list[Condition] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"filter keys must be non-empty strings, got {key!r}")
        check_utf8("a filter key", key)
        if key in LOGICAL:
            parts.append(_logical(key, value, depth))
        elif key.startswith("$"):
            raise InvalidInputError(
                f"unknown filter operator {key!r}; combine filters with $and or $or, and put "
                f"{', '.join(OPERATORS)} under a key"
            )
        else:
            parts.append(_field(key, value))
    return all_of(parts)


def _logical(name: str, value: Any, depth: int) -> Condition:
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidInputError(f"{name} takes a non-empty list of filters, not {_describe(value)}")
    parts = []
    for item in value:
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"{name} takes filters (dicts), not {type(item).__name__}")
        parts.append(_parse(item, depth + 1))
    return all_of(parts) if name == "$and" else any_of(parts)


def _field(key: str, value: Any) -> Condition:
    if isinstance(value, Mapping) and any(str(name).startswith("$") for name in value):
        names = [str(name) for name in value]
        plain = [name for name in names if not name.startswith("$")]
        if plain:
            raise InvalidInputError(
                f"filter for {key!r} mixes operators with plain keys ({plain[0]!r}); "
                f"to match a dict value, use {{'$eq': {{…}}}}"
            )
        return all_of(_operator(key, name, operand) for name, operand in value.items())
    return _equals(key, value, f"filter value for {key!r}")


def _operator(key: str, name: str, operand: Any) -> Condition:
    where = f"{name!r} for {key!r}"
    if name in ("$eq", "$ne"):
        equals = _equals(key, operand, where)
        return equals if name == "$eq" else Not(equals)
    if name in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple)):
            raise InvalidInputError(f"{where} takes a list of values, not {_describe(operand)}")
        options = any_of(_equals(key, item, where) for item in operand)
        return options if name == "$in" else Not(options)
    if name in RANGE_OPERATORS:
        if isinstance(operand, bool) or not isinstance(operand, (int, float, str)):
            raise InvalidInputError(
                f"{where} takes a number or a string (an ISO date is a string), "
                f"not {_describe(operand)}"
            )
        check_json(operand, where)
        return Compare(key, name, canonical(operand))
    raise InvalidInputError(f"unknown filter operator {where}; use one of {', '.join(OPERATORS)}")


def _equals(key: str, value: Any, where: str) -> Equals:
    if not isinstance(value, (*SCALARS, Mapping)):
        raise InvalidInputError(
            f"{where} must be a string, number, bool or dict, not {_describe(value)}"
        )
    check_json(value, where)
    value = canonical(value)
    return Equals(key, term(key, value), value)


def _describe(value: Any) -> str:
    """What a filter value is, for an error: its type, or that it is empty (`$or: []` was
    refused as "not list")."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple, dict, str)) and not value:
        return f"an empty {type(value).__name__}"
    return type(value).__name__
