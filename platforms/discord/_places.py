"""Where the Discord adapter stands in each channel: the store's channel cursors,
mirrored in memory, and the rules that keep a catch-up from skipping anything.

The rules:

- A channel's cursor moves to a message once the inbox took it (or it needs
  no answer), never back, and durably (the store) as well as in memory.
- The cursors a catch-up starts from are taken ("frozen") when the last
  session ended — on start, from the store; on a disconnect, from memory —
  not when READY arrives: live messages can come before `on_ready`, and a
  cursor moved by one of them must not move the catch-up's start past
  messages it has not read yet. Until its catch-up is done with a channel,
  live messages there move only the in-memory cursor ("protected").
- A channel where the inbox refused a message is read again later from
  before that message (`refused`, `pop_retry`), and stays protected until
  then.
- Only the `limits.channels` channels with the most recent traffic are
  caught up; the store forgets channels quiet for `limits.keep`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

from chatbridge.core.ports import ChannelCursors
from chatbridge.platforms._runtime import one_line

from ._catch_up import CatchUpLimits

__all__ = ["ChannelPlaces"]

log = logging.getLogger(__name__)

PLATFORM = "discord"


class ChannelPlaces:
    """Channel cursors of one adapter (see the module docstring)."""

    def __init__(
        self, store: ChannelCursors, *, limits: CatchUpLimits, clock: Callable[[], float]
    ) -> None:
        self._store, self._limits, self._clock = store, limits, clock
        # channel -> (newest handled message id, wall time of that traffic)
        self.known: dict[int, tuple[int, float]] = {}
        self._frozen: dict[int, int] | None = None
        self._protected: set[int] = set()
        self._retry: dict[int, int] = {}  # channel -> read again after this id

    async def load(self) -> None:
        """The store's most recent channels, frozen for the first READY's catch-up.
        A store that cannot be read leaves nothing to catch up (live messages work)."""
        since = self._clock() - self._limits.keep
        try:
            found = await self._store.cursors(PLATFORM, since=since, limit=self._limits.channels)
        except Exception as exc:
            log.warning("discord: no catch-up on this start (%s)", one_line(exc))
            return
        for cursor in found:
            with contextlib.suppress(ValueError):
                self.known[int(cursor.channel)] = (cursor.last_id, cursor.updated_at)
        self.freeze()

    def freeze(self) -> None:
        """The session ended: take the cursors the next READY starts from (once)."""
        if self._frozen is None:
            ranked = sorted(self.known.items(), key=lambda item: item[1][1], reverse=True)
            top = ranked[: self._limits.channels]
            self._frozen = {channel: last for channel, (last, _) in top}
            self._protected |= self._frozen.keys()

    def resumed(self) -> None:
        """The session was resumed (Discord replays what was missed): nothing to read."""
        if self._frozen is not None:
            self._protected -= self._frozen.keys() - self._retry.keys()
            self._frozen = None

    def take_frozen(self) -> dict[int, int] | None:
        """The cursors to catch up from now (READY), or None if nothing was frozen."""
        frozen, self._frozen = self._frozen, None
        return frozen

    async def handled(self, channel: int, message_id: int, *, live: bool = False) -> None:
        """`message_id` in `channel` reached the inbox (or needs no answer).

        A `live` message in a protected channel moves only the in-memory
        cursor: its catch-up reads past it and records the cursor itself.
        """
        now = self._clock()
        last = self.known.get(channel, (0, 0.0))[0]
        self.known[channel] = (max(last, message_id), now)
        if live and channel in self._protected:
            return
        try:
            await self._store.cursor_advance(PLATFORM, str(channel), message_id, at=now)
        except Exception as exc:  # the message is in the inbox; the next catch-up re-reads
            log.warning(
                "discord: could not record channel %s's cursor (%s)", channel, one_line(exc)
            )

    def refused(self, channel: int, message_id: int) -> None:
        """The inbox refused `message_id`: read the channel again from before it."""
        since = min(self.known.get(channel, (message_id - 1, 0.0))[0], message_id - 1)
        self._retry[channel] = min(since, self._retry.get(channel, since))
        self.known.setdefault(channel, (since, self._clock()))
        self._protected.add(channel)

    def pop_retry(self) -> dict[int, int]:
        """The channels to read again now (channel -> after which id)."""
        retry, self._retry = self._retry, {}
        return retry

    def finished(self, cursors: Mapping[int, int]) -> None:
        """A pass over `cursors` ended: those channels are live again, except the
        ones frozen again meanwhile (a lost session) or waiting for a retry."""
        waiting = (self._frozen or {}).keys() | self._retry.keys()
        self._protected -= cursors.keys() - waiting
