"""`DiscordPlatform`: gateway messages in, `handler.accept` out, `DiscordOutbox` back.

Durability: Discord never redelivers a gateway event, so a message is handed
to the engine's inbox the moment it arrives; the engine answers it, also
after a restart. Reconnects and resumes are discord.py's (it resumes at
READY's `resume_gateway_url`). What was sent while no session was live (the
process down, or a session Discord would not resume) is fetched from each
known channel's history on start and on every new READY (`_catch_up`); the
channel cursors in the store say where each channel's catch-up starts.

URLs: discord.py reads its REST root (`Route.BASE`) and first gateway
(`DiscordWebSocket.DEFAULT_GATEWAY`) from two class attributes; there is no
per-client setting, so `start()` sets both from the config (process-wide;
one Discord bot per process) and `aclose()` restores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import discord
import discord.gateway
import discord.http
import yarl

from chatbridge.core.metrics import Metrics
from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import (
    ChannelCursors,
    MentionRule,
    MessageHandler,
    Outbox,
    PlatformStartFailed,
    Route,
    always_mention,
)
from chatbridge.platforms._download import Downloader
from chatbridge.platforms._look_back import TakenHere
from chatbridge.platforms._pacing import RateBudget
from chatbridge.platforms._runtime import (
    BackgroundTasks,
    InboxRefusals,
    Taken,
    one_line,
    reveal,
    take,
)
from chatbridge.platforms._starting import StartFailures, start_or_fail
from chatbridge.platforms._threads import AnsweredThreads

from ._catch_up import CatchUp, CatchUpLimits
from ._commands import InteractionOutbox, build_tree, decode_interaction, sync_if_changed
from ._filters import decode_address, normalise
from ._outbox import DiscordOutbox
from ._places import ChannelPlaces
from ._settings import DiscordSettings

__all__ = ["DiscordPlatform"]

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
# The answers' REST calls, all chats together: 25 a second and bursts of 10,
# so never more than 35 in a second, well under Discord's global 50 per bot
# (a bot that keeps reaching it is banned for a while). Final text goes first.
REPLY_RATE, REPLY_BURST = 25.0, 10.0
TOKEN_REJECTED = (
    "discord rejected the bot token; copy it again from the Developer Portal "
    "(Bot → Reset Token) into platforms.discord.token"
)
INTENT_MISSING = (
    "discord refused the Message Content intent; switch on 'Message Content Intent' "
    "under Bot → Privileged Gateway Intents in the Developer Portal"
)
START_FAILURES: StartFailures = (
    (discord.LoginFailure, TOKEN_REJECTED),
    (discord.PrivilegedIntentsRequired, INTENT_MISSING),
)


def intents() -> discord.Intents:
    """What the bot asks for: guild and DM messages with their content (privileged)."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    wanted.typing = False
    wanted.presences = False
    return wanted


class _Threads:
    """The threads the bot answers in: those it answered in since it started,
    and every thread with a cursor (a message there reached the inbox before)."""

    def __init__(self, answered: AnsweredThreads[int], known: dict[int, tuple[int, float]]) -> None:
        self._answered, self._known = answered, known

    def __contains__(self, thread: object) -> bool:
        return thread in self._answered or thread in self._known

    def __iter__(self) -> Iterator[int]:
        return iter(set(self._answered) | self._known.keys())


class DiscordPlatform:
    """Receives Discord messages and slash commands and hands them to the engine.

    `start()` returns once the gateway sent READY (or raises
    `PlatformStartFailed` with one sentence for the admin); `connected` is
    False while the gateway is down and discord.py reconnects.
    `guild_ready_timeout` is how long discord.py waits for more guilds after
    READY before it reports ready (messages arriving meanwhile are taken).

    With `say` (the bot's own sentences), a user whose message the inbox
    cannot take is told so once (`InboxRefusals`). Discord sends nothing
    twice, so such a channel is read again from its cursor every
    `retry_every` seconds until the inbox takes what it missed.

    With `cursors` (the store) every message the inbox took advances its
    channel's cursor, and each READY starts a catch-up pass over the known
    channels (`_catch_up`), logged in one line and counted in `metrics`.
    Without them (a test of the adapter alone) nothing is caught up.
    """

    name = "discord"
    routes: tuple[Route, ...] = ()  # the gateway is a socket: no webhook

    def __init__(
        self,
        *,
        config: DiscordSettings,
        handler: MessageHandler,
        commands: Sequence[tuple[str, str]] = (),
        guild_ready_timeout: float = 0.5,
        cursors: ChannelCursors | None = None,
        metrics: Metrics | None = None,
        catch_up: CatchUpLimits | None = None,
        clock: Callable[[], float] = time.time,
        say: Callable[[str], str] | None = None,
        retry_every: float = 30.0,
        mention_rule: MentionRule = always_mention,
    ) -> None:
        self._config = config
        self._mention_rule = mention_rule
        self._handler = handler
        self._refusals = InboxRefusals(say, self.outbox) if say is not None else None
        self._metrics = metrics
        self._limits = catch_up or CatchUpLimits()
        self._places = (
            ChannelPlaces(cursors, limits=self._limits, clock=clock)
            if cursors is not None
            else None
        )
        options: dict[str, Any] = {"intents": intents(), "guild_ready_timeout": guild_ready_timeout}
        options["allowed_mentions"] = discord.AllowedMentions.none()
        self._client: discord.Client
        if config.shard_count:
            if config.shard_ids is not None:
                options["shard_ids"] = list(config.shard_ids)
            self._client = discord.AutoShardedClient(shard_count=config.shard_count, **options)
        else:
            self._client = discord.Client(**options)
        self._tree = build_tree(self._client, commands, self._take_command)
        self._answered = AnsweredThreads[int]()  # threads the bot posted in
        known = self._places.known if self._places is not None else {}
        self._threads = _Threads(self._answered, known)
        self._retrying: asyncio.Task[Any] | None = None
        self._retry_every = retry_every
        self._catch_up_lock = asyncio.Lock()
        self._taken_here = TakenHere()  # answers to these need no look back
        self._background = BackgroundTasks("discord")
        self._pace = RateBudget(REPLY_RATE, burst=REPLY_BURST)
        self._files = Downloader("discord")
        self._ready = asyncio.Event()
        self._connected = False
        self._receiving = False
        self._gateway_failure: Exception | None = None  # what ended the gateway before READY
        self._saved: tuple[str, yarl.URL] | None = None
        self._client.event(self.on_ready)
        self._client.event(self.on_shard_ready)
        self._client.event(self.on_resumed)
        self._client.event(self.on_disconnect)
        self._client.event(self.on_message)

    @property
    def connected(self) -> bool:
        return self._connected and self._receiving

    @property
    def client(self) -> discord.Client:
        return self._client

    async def start(self) -> None:
        """Reads the channel cursors, logs in, connects, waits for READY, then
        syncs slash commands if they changed. The catch-up runs beside it.

        Raises `PlatformStartFailed` with one sentence (`START_FAILURES`)."""
        if self._places is not None:
            await self._places.load()
        await start_or_fail("discord", self._connect, failures=START_FAILURES, close=self.aclose)
        await sync_if_changed(self._client, self._tree)
        me = self._client.user
        log.info("discord: receiving as %s", me.name if me else "?")

    async def _connect(self) -> None:
        """Returns at READY; raises what ended the gateway task before it."""
        self._point_at(self._config.api_base, self._config.gateway_url)
        self._receiving = True
        self._gateway_failure = None
        gateway = self._background.spawn(self._gateway(), name="gateway")
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait(
                {gateway, ready}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if self._ready.is_set():
            return
        if self._gateway_failure is not None:
            raise self._gateway_failure
        raise PlatformStartFailed(f"discord sent no READY within {START_TIMEOUT:g}s")

    async def _gateway(self) -> None:
        """The gateway session, from login until `aclose` cancels it (it is one
        of `_background`'s tasks, so stopping cancels and awaits it). discord.py
        reconnects by itself; what ends the session before READY is `start`'s
        failure (`_connect` raises it), what ends it later is logged here, once."""
        try:
            await self._client.start(reveal(self._config.token))
        except Exception as exc:
            self._connected = False
            if not self._ready.is_set():
                self._gateway_failure = exc
                return
            log.error(
                "discord: the gateway stopped; no messages arrive until a restart (%s: %s)",
                type(exc).__name__,
                one_line(exc),
            )

    def outbox(self, message: IncomingMessage) -> Outbox:
        interaction = decode_interaction(message.reply_address)
        interval = self._config.edit_interval
        if interaction is not None:
            app_id, token = interaction
            return InteractionOutbox(self._client, app_id, token, edit_interval=interval)
        address = decode_address(message.reply_address)
        return DiscordOutbox(
            self._client,
            address,
            edit_interval=interval,
            thread_name=message.text[:90] or " ".join(a.name for a in message.attachments)[:90],
            on_thread=self._opened_thread,
            question=int(message.event_id) if message.event_id.isdigit() else None,
            look_back=message.event_id not in self._taken_here,
            files=self._files,
            pace=self._pace,
        )

    async def stop_receiving(self) -> None:
        """Stops handing new messages to the engine; answers in flight still go out."""
        self._receiving = False

    async def aclose(self) -> None:
        self._receiving = self._connected = False
        await self._background.aclose()
        await self._files.aclose()
        with contextlib.suppress(Exception):
            await self._client.close()
        if self._saved is not None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self._saved
            self._saved = None

    def _point_at(self, api_base: str, gateway_url: str) -> None:
        route, ws = discord.http.Route, discord.gateway.DiscordWebSocket
        if self._saved is None:
            self._saved = (route.BASE, ws.DEFAULT_GATEWAY)
        route.BASE = api_base.rstrip("/")
        ws.DEFAULT_GATEWAY = yarl.URL(gateway_url)

    # -- gateway events ----------------------------------------------------
    async def on_ready(self) -> None:
        """READY: on start, and after every new IDENTIFY (a session Discord
        would not resume). Either way nothing sent meanwhile will come: catch up."""
        self._connected = True
        self._ready.set()
        frozen = self._places.take_frozen() if self._places is not None else None
        if frozen is not None:
            self._background.spawn(self._catch_up(frozen), name="catch-up")

    async def on_shard_ready(self, shard_id: int) -> None:
        """A shard's READY (sharded bots): discord.py fires `on_ready` only once
        for all shards, so a shard that had to IDENTIFY again shows up here."""
        await self.on_ready()

    async def on_resumed(self) -> None:
        self._connected = True
        if self._places is not None:
            self._places.resumed()  # a resume replays what was missed: no catch-up

    async def on_disconnect(self) -> None:
        self._connected = False
        if self._places is not None:
            self._places.freeze()

    async def on_message(self, message: discord.Message) -> None:
        me = self._client.user
        if me is None:
            return
        if message.author.id == me.id:
            if isinstance(message.channel, discord.Thread):
                self._answered.add(message.channel.id)
            return
        if not self._receiving:
            return
        try:
            incoming = self._normalise(message)
        except Exception as exc:
            log.warning("discord: dropped a message it could not read (%s)", one_line(exc))
            return
        if incoming is not None:
            self._connected = True  # a dispatch proves the gateway is up (RESUMED can lag)
            taken = await self._take(incoming)
            if self._places is None:
                return
            if taken is not Taken.REFUSED:
                await self._places.handled(message.channel.id, message.id, live=True)
            elif self._receiving:
                self._retry_later(message.channel.id, message.id)

    def _retry_later(self, channel: int, message_id: int) -> None:
        """The inbox refused `message_id` (a full disk): Discord will not send it
        again, so the channel is read again from before it every `retry_every`
        seconds until the inbox takes what it missed."""
        assert self._places is not None
        self._places.refused(channel, message_id)
        if self._retrying is None or self._retrying.done():
            self._retrying = self._background.spawn(self._retry_refused(), name="retry")

    async def _retry_refused(self) -> None:
        while self._receiving and self._places is not None:
            await asyncio.sleep(self._retry_every)
            channels = self._places.pop_retry()
            if not channels:
                return
            await self._catch_up(channels, why="retrying what the inbox refused")

    def _normalise(self, message: discord.Message) -> IncomingMessage | None:
        me = self._client.user
        if me is None:
            return None
        return normalise(
            message,
            me.id,
            active_threads=self._threads,
            thread_per_mention=self._config.thread_per_mention,
            mention_rule=self._mention_rule,
        )

    async def _take_command(self, message: IncomingMessage) -> bool:
        return await self._take(message) is not Taken.REFUSED

    async def _take(self, message: IncomingMessage) -> Taken:
        if not self._receiving:
            return Taken.REFUSED
        return await self._taken_here.take(
            message.event_id, take("discord", self._handler, message, refusals=self._refusals)
        )

    # -- cursors and catch-up ----------------------------------------------
    async def _handled(self, channel: int, message_id: int) -> None:
        if self._places is not None:
            await self._places.handled(channel, message_id)

    def _opened_thread(self, thread: int) -> None:
        """The outbox opened a thread for an answer: follow-ups there are answered,
        also after a restart (the thread's id is its question's, so history
        after it is the whole thread)."""
        self._answered.add(thread)
        self._background.spawn(self._handled(thread, thread), name="thread cursor")

    async def _catch_up(
        self, cursors: dict[int, int], *, why: str = "what was sent while not connected"
    ) -> None:
        """One pass; logged in one INFO line (a retry that found nothing at DEBUG)."""
        async with self._catch_up_lock:
            try:
                run = CatchUp(
                    self._client,
                    normalise=self._normalise,
                    take=self._take,
                    advance=self._handled,
                    limits=self._limits,
                )
                done = await run.run(cursors, receiving=lambda: self._receiving)
                for channel in done.refused_channels:
                    self._retry_later(channel, cursors.get(channel, 0) + 1)
            finally:
                if self._places is not None:
                    self._places.finished(cursors)
        if self._metrics is not None:
            self._metrics.catch_ups.labels(platform="discord").inc()
            for outcome, n in done.counts.items():
                self._metrics.caught_up.labels(platform="discord", outcome=outcome).inc(n)
        quiet = why.startswith("retrying") and not done.counts.get("taken")
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "discord: caught up on %s: %s",
            why,
            done.summary(),
        )
