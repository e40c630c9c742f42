"""`TelegramPlatform`: PTB in, `engine.handle` out, `TelegramOutbox` back."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from aiohttp import web
from telegram import BotCommand, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import AIORateLimiter, Application, ApplicationBuilder, ContextTypes, TypeHandler

from core.models import IncomingMessage
from platforms.base import Outbox

from ._filters import BotIdentity, accept
from ._format import MarkdownRenderer
from ._outbox import MAX_CHARS, TelegramOutbox
from ._webhook import WebhookReceiver

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
# Only new messages: edits and other update kinds are never answered, so
# Telegram need not send them at all.
ALLOWED_UPDATES = ("message",)


class EngineLike(Protocol):
    """The part of `core.engine.Engine` the adapter uses."""

    commands: list[tuple[str, str]]

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None: ...


class TelegramPlatform:
    """Receives Telegram messages (long polling or webhook) and forwards them.

    Webhook mode registers `POST /telegram/webhook` on `server` in the
    constructor, because aiohttp freezes a router once its app is started:
    build this platform before the server's runner is set up, and point
    `config.webhook_url` at that path. The route answers 503 until `start()`.

    Rate limiting: PTB's `AIORateLimiter` paces calls to Telegram's published
    limits, with `max_retries=0` so a 429 still reaches the outbox and becomes
    `DeliveryRetry`; the engine's delivery code owns the waiting and retrying.
    """

    name = "telegram"

    def __init__(
        self,
        *,
        config: Any,
        engine: EngineLike,
        server: web.Application | None = None,
        drain_timeout: float = 30.0,
    ) -> None:
        self._config = config
        self._engine = engine
        self._drain_timeout = drain_timeout
        self._webhook = config.mode == "webhook"
        if config.mode not in ("polling", "webhook"):
            raise ValueError(f"telegram mode must be polling or webhook, not {config.mode!r}")
        builder = (
            ApplicationBuilder()
            .token(_reveal(config.token))
            .rate_limiter(AIORateLimiter(max_retries=0))
            # Different chats are answered in parallel; the engine keeps the
            # messages of one conversation in order itself.
            .concurrent_updates(True)
        )
        if config.base_url:
            builder = builder.base_url(config.base_url)
        if self._webhook:
            builder = builder.updater(None)
        self._app: Application[Any, Any, Any, Any, Any, Any] = builder.build()
        self._app.add_handler(TypeHandler(Update, self._on_update))
        self._renderer = MarkdownRenderer(MAX_CHARS)
        self._me: BotIdentity | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._receiver: WebhookReceiver | None = None
        self._initialized = False
        if self._webhook:
            if server is None or not config.webhook_url:
                raise ValueError("telegram webhook mode needs a server and a webhook_url")
            self._receiver = WebhookReceiver(_reveal(config.webhook_secret), self._enqueue)
            server.router.add_post(WEBHOOK_PATH, self._receiver.handle)

    async def start(self) -> None:
        """Connects (getMe), registers commands, then starts receiving."""
        try:
            await self._start()
        except InvalidToken:
            await self.aclose()
            # PTB's own message quotes the token; keep it out of logs.
            raise RuntimeError("telegram rejected the bot token") from None
        except BaseException:
            await self.aclose()
            raise
        log.info("telegram: receiving as @%s via %s", self._app.bot.username, self._config.mode)

    async def _start(self) -> None:
        self._initialized = True
        await self._app.initialize()
        bot = self._app.bot
        self._me = BotIdentity(id=bot.id, username=bot.username)
        await self._register_commands()
        await self._app.start()
        if self._receiver is not None:
            self._receiver.accepting = True
            await bot.set_webhook(
                self._config.webhook_url,
                secret_token=_reveal(self._config.webhook_secret),
                allowed_updates=ALLOWED_UPDATES,
            )
        elif self._app.updater is not None:
            await self._app.updater.start_polling(allowed_updates=ALLOWED_UPDATES)

    async def aclose(self) -> None:
        """Stops receiving, lets answers in flight finish for up to `drain_timeout`.

        Polling stops first, which confirms the offset of every fetched update
        to Telegram; `Application.stop` then answers every one of them, so no
        update is answered twice or lost across a restart. Answers still
        running after `drain_timeout` are cancelled.
        """
        if not self._initialized:
            return
        self._initialized = False
        if self._receiver is not None:
            self._receiver.accepting = False
        if self._app.updater is not None and self._app.updater.running:
            await self._app.updater.stop()
        if self._app.running:
            timer = asyncio.get_running_loop().call_later(
                self._drain_timeout, self._cancel_inflight
            )
            try:
                await self._app.stop()
            finally:
                timer.cancel()
        await self._app.shutdown()
        # Application.shutdown skips the bot when getMe failed during start.
        await self._app.bot.shutdown()

    async def _register_commands(self) -> None:
        commands = [BotCommand(cmd.lstrip("/"), desc) for cmd, desc in self._engine.commands]
        try:
            await self._app.bot.set_my_commands(commands)
        except TelegramError as exc:
            # The command menu is a convenience; typed commands work without it.
            log.warning("telegram: setMyCommands failed: %s", exc)

    async def _enqueue(self, data: dict[str, Any]) -> None:
        try:
            update = Update.de_json(data, self._app.bot)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a Telegram update: {exc!r}") from exc
        await self._app.update_queue.put(update)

    async def _on_update(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        if self._me is None:
            return
        accepted = accept(update, self._me)
        if accepted is None:
            return
        outbox = TelegramOutbox(
            self._app.bot,
            accepted.chat_id,
            thread_id=accepted.thread_id,
            reply_to=accepted.reply_to,
            edit_interval=self._config.edit_interval,
            renderer=self._renderer,
        )
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            await self._engine.handle(accepted.message, outbox)
        except Exception:
            log.exception("telegram: engine failed on %s", accepted.message.event_id)
        finally:
            self._inflight.discard(task)  # type: ignore[arg-type]

    def _cancel_inflight(self) -> None:
        log.warning("telegram: cancelling %d answers still running", len(self._inflight))
        for task in self._inflight:
            task.cancel()


def _reveal(secret: Any) -> str:
    """The plain value of a pydantic `SecretStr` (or of a plain string)."""
    if hasattr(secret, "get_secret_value"):
        return str(secret.get_secret_value())
    return str(secret or "")
