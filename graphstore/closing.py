"""`Closing`: `with` and `async with` for anything that has `close` and `aclose`."""

from __future__ import annotations

from typing import Self


class Closing:
    """Closes on leaving a `with` (`close`) or an `async with` (`aclose`) block: a store
    holds a file or a driver cluster and its threads until closed."""

    def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exception: object) -> None:
        await self.aclose()
