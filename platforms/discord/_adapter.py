"""`DiscordPlatform`: gateway messages in, `handler.accept` out, `DiscordOutbox` back.

Durability: Discord never redelivers a gateway event, so a message is handed
to the engine's inbox the moment it arrives; the engine answers it, also
after a restart. Reconnects and resumes are discord.py's (it resumes at
READY's `resume_gateway_url`).

URLs: discord.py reads its REST root (`Route.BASE`) and first gateway
(`DiscordWebSocket.DEFAULT_GATEWAY`) from two class attributes; there is no
per-client setting, so `start()` sets both from the config (process-wide;
one Discord bot per process) and `aclose()` restores them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import discord
import discord.gateway
import discord.http
import yarl
from aiohttp import web

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import MessageHandler, Outbox, PlatformStartFailed
from chatbridge.platforms._runtime import accept_safely, one_line, reveal

from ._commands import InteractionOutbox, build_tree, decode_interaction, sync_if_changed
from ._filters import accept, decode_address
from ._outbox import DiscordOutbox

__all__ = ["DiscordPlatform"]

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
TOKEN_REJECTED = (
    "discord rejected the bot token; copy it again from the Developer Portal "
    "(Bot → Reset Token) into platforms.discord.token"
)
INTENT_MISSING = (
    "discord refused the Message Content intent; switch on 'Message Content Intent' "
    "under Bot → Privileged Gateway Intents in the Developer Portal"
)


def intents() -> discord.Intents:
    """What the bot asks for: guild and DM messages with their content (privileged)."""
    wanted = discord.Intents.default()
    wanted.message_content = True
    wanted.typing = False
    wanted.presences = False
    return wanted


class DiscordPlatform:
    """Receives Discord messages and slash commands and hands them to the engine.

    `start()` returns once the gateway sent READY (or raises
    `PlatformStartFailed` with one sentence for the admin); `connected` is
    False while the gateway is down and discord.py reconnects.
    `guild_ready_timeout` is how long discord.py waits for more guilds after
    READY before it reports ready (messages arriving meanwhile are taken).
    """

    name = "discord"

    def __init__(
        self,
        *,
        config: Any,
        handler: MessageHandler,
        commands: Sequence[tuple[str, str]] = (),
        server: web.Application | None = None,
        guild_ready_timeout: float = 0.5,
    ) -> None:
        self._config = config
        self._handler = handler
        options: dict[str, Any] = {"intents": intents(), "guild_ready_timeout": guild_ready_timeout}
        options["allowed_mentions"] = discord.AllowedMentions.none()
        shard_count = getattr(config, "shard_count", None)
        self._client: discord.Client
        if shard_count:
            shard_ids = getattr(config, "shard_ids", None)
            if shard_ids is not None:
                options["shard_ids"] = list(shard_ids)
            self._client = discord.AutoShardedClient(shard_count=shard_count, **options)
        else:
            self._client = discord.Client(**options)
        self._tree = build_tree(self._client, commands, self._accept)
        self._answered: set[int] = set()  # threads the bot posted in
        self._ready = asyncio.Event()
        self._connected = False
        self._receiving = False
        self._task: asyncio.Task[None] | None = None
        self._saved: tuple[str, yarl.URL] | None = None
        self._client.event(self.on_ready)
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
        """Logs in, connects, waits for READY, then syncs slash commands if they changed."""
        self._point_at(self._config.api_base, self._config.gateway_url)
        self._receiving = True
        self._task = asyncio.create_task(self._client.start(reveal(self._config.token)))
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait(
                {self._task, ready}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if not self._ready.is_set():
            await self._fail()
        await sync_if_changed(self._client, self._tree)
        me = self._client.user
        log.info("discord: receiving as %s", me.name if me else "?")

    async def _fail(self) -> None:
        task = self._task
        exc = task.exception() if task is not None and task.done() else None
        await self.aclose()
        if isinstance(exc, discord.LoginFailure):
            raise PlatformStartFailed(TOKEN_REJECTED) from None
        if isinstance(exc, discord.PrivilegedIntentsRequired):
            raise PlatformStartFailed(INTENT_MISSING) from None
        if exc is None:
            raise PlatformStartFailed(f"discord sent no READY within {START_TIMEOUT:g}s")
        raise PlatformStartFailed(
            f"discord could not start ({type(exc).__name__}: {one_line(exc)})"
        ) from None

    def outbox(self, message: IncomingMessage) -> Outbox:
        interaction = decode_interaction(message.reply_address)
        interval = float(self._config.edit_interval)
        if interaction is not None:
            app_id, token = interaction
            return InteractionOutbox(self._client, app_id, token, edit_interval=interval)
        address = decode_address(message.reply_address)
        return DiscordOutbox(
            self._client,
            address,
            edit_interval=interval,
            thread_name=message.text[:90],
            on_thread=self._answered.add,
        )

    async def stop_receiving(self) -> None:
        """Stops handing new messages to the engine; answers in flight still go out."""
        self._receiving = False

    async def aclose(self) -> None:
        self._receiving = self._connected = False
        with contextlib.suppress(Exception):
            await self._client.close()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 5.0)
            self._task = None
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
        self._connected = True
        self._ready.set()

    async def on_resumed(self) -> None:
        self._connected = True

    async def on_disconnect(self) -> None:
        self._connected = False

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
            incoming = accept(
                message,
                me.id,
                active_threads=self._answered,
                thread_per_mention=bool(getattr(self._config, "thread_per_mention", False)),
            )
        except Exception as exc:
            log.warning("discord: dropped a message it could not read (%s)", one_line(exc))
            return
        if incoming is not None:
            self._connected = True  # a dispatch proves the gateway is up (RESUMED can lag)
            await self._accept(incoming)

    async def _accept(self, message: IncomingMessage) -> bool:
        if not self._receiving:
            return False
        return await accept_safely("discord", self._handler, message)
