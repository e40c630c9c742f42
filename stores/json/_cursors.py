"""The JSON store's channel cursors (see `core.ports.store.ChannelCursors`),
in the state file's `"cursors"`: platform -> channel -> (last_id, at).

Changes return their undo, as the inbox's do (`_inbox`)."""

from __future__ import annotations

from chatbridge.core.models import ChannelCursor
from chatbridge.stores.json._files import State, put
from chatbridge.stores.json._inbox import Undo

__all__ = ["advance", "forget_quiet", "recent"]


def advance(state: State, platform: str, channel: str, last_id: int, at: float) -> Undo | None:
    """Move the cursor forward (never back); None when it did not move."""
    channels = state.cursors.setdefault(platform, {})
    old = channels.get(channel)
    new = (last_id, at) if old is None else (max(old[0], last_id), max(old[1], at))
    if new == old:
        return None
    channels[channel] = new

    def undo() -> None:
        put(channels, channel, old)

    return undo


def forget_quiet(state: State, platform: str, since: float) -> Undo | None:
    """Drop the channels quieter than `since`; None when there were none."""
    channels = state.cursors.get(platform, {})
    quiet = {c: v for c, v in channels.items() if v[1] < since}
    if not quiet:
        return None
    for channel in quiet:
        del channels[channel]

    def undo() -> None:
        channels.update(quiet)

    return undo


def recent(state: State, platform: str, limit: int) -> list[ChannelCursor]:
    """The most recently active channels first, at most `limit`."""
    channels = state.cursors.get(platform, {})
    latest = sorted(channels.items(), key=lambda item: item[1][1], reverse=True)[:limit]
    return [ChannelCursor(platform, c, last, at) for c, (last, at) in latest]
