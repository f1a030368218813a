"""`--filter` expressions of the command line as a filter dict (`graphstore.filters`).

    chapter<=27   book=西游记   book!=红楼梦   date>=2024-05-01   chapter in 1,2,3
    position=3    position='"3"'   book not in ["a,b", "c"]

An expression is `KEY=VALUE`, `KEY!=VALUE`, `KEY<VALUE` (also `<=`, `>`, `>=`), or
`KEY in V1,V2,…` / `KEY not in …` (a JSON list also works, for values holding commas).  A
value is read as JSON when it is a number (full-width digits too), `true`/`false` or a
quoted string, and as plain text otherwise; an empty value is refused (a shell variable that
was not set), `""` is the empty string.  Several expressions must all hold.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from graphstore.errors import InvalidInputError
from graphstore.filters import parse_filter

Scalar = str | int | float | bool
COMPARISON = re.compile(r"(?P<key>[^=<>!]+?)\s*(?P<op><=|>=|!=|=|<|>)\s*(?P<value>.*)", re.S)
MEMBERSHIP = re.compile(r"(?P<key>[^=<>!\s][^=<>!]*?)\s+(?P<op>not\s+in|in)\s+(?P<values>.+)", re.S)
OPERATORS = {"=": "$eq", "!=": "$ne", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}
USAGE = "KEY=VALUE, KEY!=VALUE, KEY<VALUE (<=, >, >=) or 'KEY in V1,V2' ('not in')"


NUMBER = re.compile(r"\s*-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\s*")
"""JSON's number syntax: a value written so is a number or an error, never text."""


def filter_value(text: str) -> Scalar:
    """`3` → 3, `2.5` → 2.5, `true` → True, `"3"` → "3"; anything else is the text itself,
    but a number that no store value can equal (`1e400`, 5,000 digits) is an error.  A
    number in full-width digits (`２７`, as a Chinese input method types it) is the number:
    as text it matched no chapter, and said nothing."""
    narrow = unicodedata.normalize("NFKC", text)
    if narrow != text and NUMBER.fullmatch(narrow):
        text = narrow
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if NUMBER.fullmatch(text):
        shown = text.strip() if len(text.strip()) <= 24 else f"{text.strip()[:20]}…"
        raise InvalidInputError(f"--filter number {shown} is out of range")
    return text


def _items(text: str) -> list[str]:
    """`text` split at the commas outside double quotes: `"a,b",c` is `"a,b"` and `c` (a
    quoted value holding a comma was cut in two, and matched nothing)."""
    items, start, quoted, escaped = [], 0, False, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            items.append(text[start:index])
            start = index + 1
    return [*items, text[start:]]


def _values(text: str) -> list[Scalar]:
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if isinstance(listed, list):
        return [filter_value(json.dumps(item, ensure_ascii=False)) for item in listed]
    items = [item.strip() for item in _items(text)]
    if not all(items):  # `book in ,`, `book in a,`
        raise InvalidInputError(f"--filter list {text!r} has an empty value (write '\"\"' for it)")
    return [filter_value(item) for item in items]


def expression(text: str) -> tuple[str, Any]:
    """One expression as a key and its condition (a value, or `{operator: operand}`)."""
    key, condition = _key_and_condition(text)
    if key.startswith("$"):  # `$or=…`: the filter dict's operators have no --filter syntax
        raise InvalidInputError(
            f"--filter {text!r}: {key} is a filter operator, not a metadata key; --filter "
            f"expects {USAGE}, and several --filter options must all hold"
        )
    return key, condition


def _key_and_condition(text: str) -> tuple[str, Any]:
    found = MEMBERSHIP.fullmatch(text.strip())
    if found is not None:
        operator = "$in" if found["op"] == "in" else "$nin"
        return found["key"].strip(), {operator: _values(found["values"])}
    found = COMPARISON.fullmatch(text.strip())
    if found is None or not found["key"].strip():
        raise InvalidInputError(f"--filter expects {USAGE}, got {text!r}")
    if found["value"].lstrip()[:1] in ("=", "<", ">", "!"):  # `chapter<<3`, `book==a`
        raise InvalidInputError(
            f"--filter expects {USAGE}, got {text!r} (quote a value that starts with an "
            "operator as JSON text: KEY='\"<3\"')"
        )
    if not found["value"].strip():  # `chapter<`, `book=$UNSET`
        raise InvalidInputError(
            f"--filter {text!r} has no value (write KEY='\"\"' for the empty string)"
        )
    key, value = found["key"].strip(), filter_value(found["value"])
    if found["op"] == "=":
        return key, value
    return key, {OPERATORS[found["op"]]: value}


def filter_of(expressions: Sequence[str]) -> dict[str, Any] | None:
    """The filter all `expressions` make together (None for none), checked."""
    parts = [expression(text) for text in expressions]
    if not parts:
        return None
    keys = [key for key, _ in parts]
    combined = dict(parts) if len(set(keys)) == len(keys) else {"$and": [dict([p]) for p in parts]}
    parse_filter(combined)
    return combined
