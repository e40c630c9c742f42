"""Discord catch-up: what users wrote while no gateway session was live.

Discord replays missed dispatches only to a session that RESUMEs. After a
restart, or an INVALID_SESSION that makes discord.py IDENTIFY again (READY,
then `on_ready` once more), nothing comes back. So for every channel in
which a message reached the inbox (its cursor in the store, DMs and threads
included), the adapter reads the history after the newest message it
handled there and hands each message to the same normaliser and inbox as a
live one: DMs, mentions, replies to the bot and follow-ups in its threads
are answered once (the inbox drops what it holds already), other channel
messages stay unanswered, and each message counts as sent when its user
sent it (`IncomingMessage.sent_at`), so one older than
`engine.redeliver_within` gets the engine's notice instead of an answer.

Bounds, per pass: the `channels` channels with the most recent traffic, and
in each the newest `messages` messages after its cursor (newest first, so a
long outage answers what is still fresh; older ones past the bound are not
read and are counted as skipped). A channel without traffic for `keep`
(7 days) is forgotten by the store. The reads are discord.py's
`channel.history(after=…, oldest_first=False)`: its pagination and its rate
limiting (a 429 is waited out inside discord.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import discord

from chatbridge.core.models import IncomingMessage
from chatbridge.platforms._runtime import Taken, one_line

__all__ = ["CatchUp", "CatchUpLimits", "Pass"]

log = logging.getLogger(__name__)

DAY = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class CatchUpLimits:
    """How much one catch-up pass may read; see the module docstring."""

    channels: int = 100
    messages: int = 200
    keep: float = 7 * DAY


@dataclass(slots=True)
class Pass:
    """What one catch-up pass did, for its log line and the metrics."""

    channels: int = 0
    read: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unreachable: int = 0
    capped: int = 0  # channels with more new messages than `messages`
    refused_channels: set[int] = field(default_factory=set)  # stopped at a refusal

    def count(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def summary(self) -> str:
        shown = ("taken", "duplicate", "ignored", "refused")
        parts = [f"{self.counts.get(name, 0)} {name}" for name in shown]
        extra = f"; {self.unreachable} channels unreachable" if self.unreachable else ""
        extra += f"; {self.capped} channels had more than the bound" if self.capped else ""
        return f"{self.channels} channels, {self.read} messages read ({', '.join(parts)}){extra}"


Normalise = Callable[[discord.Message], IncomingMessage | None]
Take = Callable[[IncomingMessage], Awaitable[Taken]]
Advance = Callable[[int, int], Awaitable[None]]


class CatchUp:
    """One pass over the channels given to `run`; the adapter owns the cursors.

    `normalise` is the live path's (`_filters.normalise` with the bot's threads),
    `take` hands a message to the inbox, `advance(channel, message_id)`
    records a handled message (in memory and the store). A channel's cursor
    moves past a message only once the inbox took it (or it needs no answer);
    at the first refusal the channel stops, so the next pass reads it again.
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        normalise: Normalise,
        take: Take,
        advance: Advance,
        limits: CatchUpLimits,
    ) -> None:
        self._client = client
        self._normalise = normalise
        self._take = take
        self._advance = advance
        self._limits = limits

    async def run(self, cursors: Mapping[int, int], *, receiving: Callable[[], bool]) -> Pass:
        """Catch up every channel of `cursors` (channel -> last handled id) while
        `receiving()`; returns the tally. Never raises but cancellation."""
        done = Pass()
        for channel_id, last in cursors.items():
            if not receiving():
                break
            done.channels += 1
            try:
                await self._channel(channel_id, last, done, receiving)
            except (discord.HTTPException, discord.ClientException, discord.InvalidData) as exc:
                done.unreachable += 1
                log.warning("discord: catch-up skipped channel %s (%s)", channel_id, one_line(exc))
        return done

    async def _channel(
        self, channel_id: int, last: int, done: Pass, receiving: Callable[[], bool]
    ) -> None:
        channel = self._client.get_channel(channel_id)
        if channel is None:
            channel = await self._client.fetch_channel(channel_id)  # DMs are not cached
        if not isinstance(channel, discord.abc.Messageable):
            raise discord.InvalidData(f"channel {channel_id} holds no messages")
        limit = self._limits.messages
        newest_first = [
            m
            async for m in channel.history(
                limit=limit, after=discord.Object(id=last), oldest_first=False
            )
        ]
        done.read += len(newest_first)
        if len(newest_first) >= limit:
            done.capped += 1  # in the pass's summary line; which channel at DEBUG
            log.debug(
                "discord: channel %s had more than %s new messages; the older ones were not read",
                channel_id,
                limit,
            )
        me = self._client.user
        newest = last
        for message in reversed(newest_first):
            if not receiving():
                return
            incoming = None
            if me is not None and message.author.id != me.id:
                incoming = self._normalise(message)
            if incoming is None:
                done.count("ignored")
                newest = message.id
                continue
            sent_at = message.created_at.timestamp()
            outcome = await self._take(dataclasses.replace(incoming, sent_at=sent_at))
            done.count(outcome.value)
            if outcome is Taken.REFUSED:
                done.refused_channels.add(channel_id)
                return  # not past it: the next pass reads it again
            newest = message.id
            await self._advance(channel_id, newest)
        if newest != last:
            await self._advance(channel_id, newest)
