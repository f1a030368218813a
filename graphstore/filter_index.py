"""The embedded backend's filter index: which node slots pass a condition, as a boolean mask.

Equality reads a posting list per filter term; a range reads the key's values of that type
kept sorted (rebuilt after the key changes, on the next range query), so a filter costs a
few array operations over the slots, never a Python call per node.  One mask per search
call serves the root search and every tag of a traversal step.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np
from numpy.typing import NDArray

from graphstore.filters import (
    EVERYTHING,
    AllOf,
    Compare,
    Condition,
    Equals,
    FilterValues,
    Not,
    Orderable,
)

Mask = NDArray[np.bool_]
Slots = NDArray[np.intp]
RangeKey = tuple[bool, str]
"""(numbers?, key): one sorted list of values per key and type."""


class _Sorted:
    """A key's values of one type, sorted, with the slot of each."""

    def __init__(self, by_slot: dict[int, tuple[Orderable, ...]]) -> None:
        pairs = sorted((value, slot) for slot, values in by_slot.items() for value in values)
        self.values = [value for value, _ in pairs]
        self.slots: Slots = np.fromiter((slot for _, slot in pairs), np.intp, len(pairs))

    def passing(self, compare: Compare) -> Slots:
        """Slots with a value satisfying `compare` (a slot may appear more than once)."""
        bound = compare.value
        if compare.operator == "$lt":
            return self.slots[: bisect_left(self.values, bound)]
        if compare.operator == "$lte":
            return self.slots[: bisect_right(self.values, bound)]
        if compare.operator == "$gt":
            return self.slots[bisect_right(self.values, bound) :]
        return self.slots[bisect_left(self.values, bound) :]


class FilterIndex:
    """Filter values of every live slot, indexed for `mask`."""

    def __init__(self) -> None:
        self.values: dict[int, FilterValues] = {}
        self._terms: dict[str, set[int]] = {}
        self._term_arrays: dict[str, Slots] = {}
        self._ranges: dict[RangeKey, dict[int, tuple[Orderable, ...]]] = {}
        self._sorted: dict[RangeKey, _Sorted] = {}

    def add(self, slot: int, values: FilterValues) -> None:
        self.values[slot] = values
        for term in values.terms:
            self._terms.setdefault(term, set()).add(slot)
            self._term_arrays.pop(term, None)
        for key, found in self._range_values(values):
            self._ranges.setdefault(key, {})[slot] = found
            self._sorted.pop(key, None)

    def discard(self, slot: int) -> None:
        values = self.values.pop(slot)
        for term in values.terms:
            self._terms[term].discard(slot)
            self._term_arrays.pop(term, None)
            if not self._terms[term]:
                del self._terms[term]
        for key, _ in self._range_values(values):
            del self._ranges[key][slot]
            self._sorted.pop(key, None)
            if not self._ranges[key]:
                del self._ranges[key]

    @staticmethod
    def _range_values(values: FilterValues) -> list[tuple[RangeKey, tuple[Orderable, ...]]]:
        numbers = [((True, key), found) for key, found in values.numbers.items()]
        return numbers + [((False, key), found) for key, found in values.strings.items()]

    def mask(self, condition: Condition, size: int) -> Mask | None:
        """Which of slots 0..size-1 pass `condition` (None: every slot, no filter)."""
        if condition is EVERYTHING or condition == EVERYTHING:  # the first test is the cheap one
            return None
        return self._mask(condition, size)

    def _mask(self, condition: Condition, size: int) -> Mask:
        if isinstance(condition, Equals):
            return self._of_slots(self._term_slots(condition.term), size)
        if isinstance(condition, Compare):
            return self._of_slots(self._range_slots(condition), size)
        if isinstance(condition, Not):
            return ~self._mask(condition.condition, size)
        parts = (self._mask(part, size) for part in condition.conditions)
        if isinstance(condition, AllOf):
            found = np.ones(size, dtype=np.bool_)
            for part in parts:
                found &= part
            return found
        found = np.zeros(size, dtype=np.bool_)
        for part in parts:
            found |= part
        return found

    @staticmethod
    def _of_slots(slots: Slots, size: int) -> Mask:
        found = np.zeros(size, dtype=np.bool_)
        found[slots] = True
        return found

    def _term_slots(self, term: str) -> Slots:
        cached = self._term_arrays.get(term)
        if cached is None:
            posting = self._terms.get(term, set())
            cached = np.fromiter(posting, dtype=np.intp, count=len(posting))
            self._term_arrays[term] = cached
        return cached

    def _range_slots(self, compare: Compare) -> Slots:
        key = (compare.is_number, compare.key)
        by_slot = self._ranges.get(key)
        if by_slot is None:
            return np.zeros(0, dtype=np.intp)
        ordered = self._sorted.get(key)
        if ordered is None:
            ordered = self._sorted[key] = _Sorted(by_slot)
        return ordered.passing(compare)
