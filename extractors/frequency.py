"""Dense-tag control: drop tags that too many passages carry.

A keyword like "film" on half the corpus links every one of those passages to every other:
traversal then fans out to noise, and the tag's row count grows with the corpus.  Like
sklearn's `max_df`, a tag whose document frequency is above the threshold is dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable

from graphstore.errors import InvalidInputError
from graphstore.links import Link, TagKey


def check_share(name: str, share: float) -> float:
    """`share`, a share of passages above 0 and at most 1, or a one-line error naming it as
    the caller knows it (`max_df`, the CLI's `--max-tag-df`)."""
    if not 0.0 < share <= 1.0:
        raise InvalidInputError(f"{name} must be above 0 and at most 1, not {share}")
    return share


class TagFrequencyFilter:
    """Count each `(kind, tag)`'s passages with `fit`, then `apply` the limits.

    `max_df` is a fraction of the fitted passages, `max_count` a number of passages; a tag
    above either is dropped.  `kinds`, when given, limits the filter to those kinds.
    """

    def __init__(
        self,
        max_df: float | None = None,
        max_count: int | None = None,
        *,
        kinds: Collection[str] | None = None,
    ) -> None:
        if max_df is not None:
            check_share("max_df", max_df)
        if max_count is not None and max_count < 1:
            raise InvalidInputError(f"max_count must be at least 1, not {max_count}")
        self.max_df = max_df
        self.max_count = max_count
        self.kinds = None if kinds is None else frozenset(kinds)
        self.frequencies: Counter[TagKey] = Counter()
        self.passages = 0

    def fit(self, link_sets: Iterable[Iterable[Link]]) -> TagFrequencyFilter:
        """Count, for each `(kind, tag)`, how many passages carry it (in any direction).

        Counts add up over calls, so a corpus can be fitted batch by batch."""
        for links in link_sets:
            self.frequencies.update({link.key for link in links})
            self.passages += 1
        return self

    def limit(self) -> float:
        """The largest passage count a tag may have and stay."""
        limits: list[float] = [float("inf")]
        if self.max_df is not None:
            limits.append(self.max_df * self.passages)
        if self.max_count is not None:
            limits.append(self.max_count)
        return min(limits)

    def dropped(self) -> set[TagKey]:
        """The fitted tags above the limit."""
        limit = self.limit()
        return {
            key
            for key, count in self.frequencies.items()
            if count > limit and (self.kinds is None or key[0] in self.kinds)
        }

    def apply(self, link_sets: Iterable[Iterable[Link]]) -> list[set[Link]]:
        """Each link set without the dropped tags."""
        dropped = self.dropped()
        return [{link for link in links if link.key not in dropped} for links in link_sets]

    def fit_apply(self, link_sets: Iterable[Iterable[Link]]) -> list[set[Link]]:
        """`fit` then `apply` on the same passages."""
        materialized = [list(links) for links in link_sets]
        return self.fit(materialized).apply(materialized)
