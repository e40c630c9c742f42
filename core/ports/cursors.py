"""Where a platform that never redelivers keeps its place in each channel.

Discord replays nothing sent while no gateway session was live, so its
adapter records, per channel, the newest message it handed to the inbox and
reads what came after it on start and after a lost session (its catch-up).
Every store implements this (`core.ports.store.Store` includes it).
"""

from __future__ import annotations

from typing import Protocol

from chatbridge.core.models import ChannelCursor

__all__ = ["ChannelCursors"]


class ChannelCursors(Protocol):
    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        """Record `last_id` as handled in `channel` at wall time `at`, durably.

        A cursor never moves back: a smaller `last_id` than the stored one
        keeps the stored one (and `at` only ever moves forward too).
        """
        ...

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        """The channels of `platform` with traffic at or after `since`, the
        most recent first, at most `limit`. Channels quieter than `since` are
        forgotten (deleted) on the way."""
        ...
