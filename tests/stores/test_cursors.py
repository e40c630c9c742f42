"""Channel cursors (issue 17.1), the same contract in every backend.

A cursor records the newest message handled in a channel, never moves back,
survives a reopen, and a channel quiet for longer than asked is forgotten.
"""

from __future__ import annotations

from pathlib import Path

from chatbridge.core.models import ChannelCursor
from tests.stores.helpers import AnyStore, opened

SNOWFLAKE = 1_300_000_000_000_000_000  # Discord IDs pass 2^53: no float may touch them


async def test_a_cursor_moves_forward_only_and_lists_newest_first(store: AnyStore) -> None:
    await store.cursor_advance("discord", "10", SNOWFLAKE + 5, at=100.0)
    await store.cursor_advance("discord", "10", SNOWFLAKE + 3, at=90.0)  # older: ignored
    await store.cursor_advance("discord", "20", SNOWFLAKE + 1, at=200.0)
    await store.cursor_advance("telegram", "30", 7, at=300.0)
    assert await store.cursors("discord", since=0.0, limit=10) == [
        ChannelCursor("discord", "20", SNOWFLAKE + 1, 200.0),
        ChannelCursor("discord", "10", SNOWFLAKE + 5, 100.0),
    ]
    await store.cursor_advance("discord", "10", SNOWFLAKE + 6, at=150.0)
    [first, second] = await store.cursors("discord", since=0.0, limit=10)
    assert (second.channel, second.last_id, second.updated_at) == ("10", SNOWFLAKE + 6, 150.0)
    assert first.channel == "20"


async def test_ids_that_differ_past_double_precision_still_order(store: AnyStore) -> None:
    big = 2**62 + 1
    await store.cursor_advance("discord", "1", big + 1, at=1.0)
    await store.cursor_advance("discord", "1", big, at=1.0)  # equal as a double
    [cursor] = await store.cursors("discord", since=0.0, limit=1)
    assert cursor.last_id == big + 1
    await store.cursor_advance("discord", "1", big + 2, at=1.0)
    [cursor] = await store.cursors("discord", since=0.0, limit=1)
    assert cursor.last_id == big + 2


async def test_the_limit_keeps_the_most_recent_channels(store: AnyStore) -> None:
    for n in range(5):
        await store.cursor_advance("discord", str(n), SNOWFLAKE + n, at=float(n))
    assert [c.channel for c in await store.cursors("discord", since=0.0, limit=2)] == ["4", "3"]


async def test_quiet_channels_are_forgotten_and_it_all_survives_a_reopen(
    backend: str, path: Path, store: AnyStore
) -> None:
    await store.cursor_advance("discord", "old", SNOWFLAKE, at=10.0)
    await store.cursor_advance("discord", "new", SNOWFLAKE + 9, at=1000.0)
    await store.aclose()
    again = await opened(backend, path)
    try:
        assert [c.channel for c in await again.cursors("discord", since=0.0, limit=9)] == [
            "new",
            "old",
        ]
        assert [c.channel for c in await again.cursors("discord", since=500.0, limit=9)] == ["new"]
        # Forgotten, not only hidden: a later, wider look does not bring it back.
        assert [c.channel for c in await again.cursors("discord", since=0.0, limit=9)] == ["new"]
    finally:
        await again.aclose()
