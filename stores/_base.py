"""What every backend's store class shares: `async with`, and no replication."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from chatbridge.core.ports.store import Replication

__all__ = ["StoreBase"]


class StoreBase:
    """`async with store:` opens it and closes it on the way out; a store is
    single-process (`replication` is None) unless its backend says otherwise."""

    async def open(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def replication(self, *, lease_ttl: float) -> Replication | None:
        return None
