"""`TelegramPlatform`: Bot API updates in, `handler.accept` out, `TelegramOutbox` back.

Durability: an update is acknowledged to Telegram only after the engine's
inbox holds it. In polling mode chatbridge runs its own `getUpdates` loop
(python-telegram-bot's `Updater` confirms a batch as soon as it is fetched)
and moves the offset past an update only once `accept` returned; in webhook
mode the 200 follows `accept`. A crash therefore loses nothing: Telegram
sends the unconfirmed updates again and the inbox drops the ones it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from telegram import BotCommand, Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import ExtBot
from telegram.warnings import PTBUserWarning

from chatbridge.core.models import ChatKind, IncomingMessage
from chatbridge.core.ports import MentionRule, MessageHandler, Route, always_mention
from chatbridge.platforms._runtime import (
    BackgroundTasks,
    InboxRefusals,
    Taken,
    one_line,
    reveal,
    take,
)
from chatbridge.platforms._starting import start_or_fail

from ._drafts import DraftSwitch
from ._files import TelegramFiles, file_base_url
from ._filters import BotIdentity, decode_address, normalise
from ._format import MarkdownRenderer
from ._outbox import MAX_CHARS, TelegramOutbox, _seconds, telegram_delivery
from ._pacing import TelegramPacer
from ._settings import TelegramSettings
from ._webhook import WebhookReceiver

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
# Only new messages: edits and other update kinds are never answered, so
# Telegram need not send them at all.
ALLOWED_UPDATES = ("message",)
POLL_TIMEOUT = 25  # seconds Telegram holds an empty long poll
MAX_BACKOFF = 30.0


class TelegramPlatform:
    """Receives Telegram messages (long polling or webhook) and hands them to the engine.

    Webhook mode declares `POST /telegram/webhook` in `routes` (chatbridge's
    server mounts it; point `config.webhook_url` at that path). The route
    answers 503 until `start()`.

    Rate limiting: `TelegramPacer` (PTB's rate-limiter interface) paces calls
    to Telegram's published limits per chat and per bot, final text before
    progress; a 429 still reaches the outbox and becomes `DeliveryRetry`; the
    shared delivery code owns the waiting and retrying.
    """

    name = "telegram"
    routes: tuple[Route, ...] = ()  # webhook mode: POST WEBHOOK_PATH

    def __init__(
        self,
        *,
        config: TelegramSettings,
        handler: MessageHandler,
        commands: Sequence[tuple[str, str]] = (),
        say: Callable[[str], str] | None = None,
        mention_rule: MentionRule = always_mention,
    ) -> None:
        """`say` gives the bot's own sentences (its language); with it, a user whose
        message the inbox cannot take is told so (`InboxRefusals`). `mention_rule`
        says where group messages need no mention (`require_mention: false`)."""
        self._mention_rule = mention_rule
        if config.mode not in ("polling", "webhook"):
            raise ValueError(f"telegram mode must be polling or webhook, not {config.mode!r}")
        self._config = config
        self._handler = handler
        self._refusals = InboxRefusals(say, self.outbox) if say is not None else None
        self._commands = tuple(commands)
        self._webhook = config.mode == "webhook"
        base_url = config.base_url or "https://api.telegram.org/bot"
        self._bot: ExtBot[Any] = ExtBot(
            reveal(config.token),
            base_url=base_url,
            base_file_url=file_base_url(base_url),
            rate_limiter=TelegramPacer(),
        )
        self._files = TelegramFiles(self._bot)
        self._renderer = MarkdownRenderer(MAX_CHARS)
        self._delivery = telegram_delivery()
        self._drafts = DraftSwitch(bool(config.drafts))
        self._me: BotIdentity | None = None
        self._tasks = BackgroundTasks("telegram")
        self._offset: int | None = None
        self._receiving = False
        self._started = False
        self._receiver: WebhookReceiver | None = None
        if self._webhook:
            if not config.webhook_url:
                raise ValueError("telegram webhook mode needs a webhook_url")
            self._receiver = WebhookReceiver(reveal(config.webhook_secret), self._receive)
            self.routes = (Route("POST", WEBHOOK_PATH, self._receiver.handle),)

    @property
    def connected(self) -> bool:
        return self._receiving

    async def start(self) -> None:
        """Connects (getMe), registers commands, then starts receiving.

        Raises `PlatformStartFailed` with one sentence (`start_or_fail`; PTB's
        own `InvalidToken` message quotes the token, so it never shows)."""
        failures = ((InvalidToken, self._refusal),)
        await start_or_fail("telegram", self._start, failures=failures, close=self.aclose)
        log.info("telegram: receiving as @%s via %s", self._bot.username, self._config.mode)

    def _refusal(self, exc: Exception) -> str:
        """PTB raises `InvalidToken` for 401 and 404 alike (`Bot.initialize`
        wraps the server's answer as `__cause__`). The Bot API answers 401 to
        a token it does not know; 404 means no Bot API at `base_url` (a wrong
        path or host) or a token too malformed to route."""
        answer = str(exc.__cause__ or exc)
        if "Not Found" not in answer and "(404)" not in answer:
            return "telegram rejected the bot token; check platforms.telegram.token"
        return (
            f"no Bot API at {self._config.base_url} (getMe answered 404); check "
            "platforms.telegram.base_url (it ends in /bot), then the form of "
            "platforms.telegram.token (123456789:AA...)"
        )

    async def _start(self) -> None:
        self._started = True
        await self._bot.initialize()
        self._me = BotIdentity(id=self._bot.id, username=self._bot.username)
        # The command menu is a convenience: set it beside receiving, not before.
        self._tasks.spawn(self._register_commands(), name="setMyCommands")
        self._receiving = True
        if self._receiver is not None:
            self._receiver.accepting = True
            await self._bot.set_webhook(
                self._config.webhook_url,
                secret_token=reveal(self._config.webhook_secret),
                allowed_updates=ALLOWED_UPDATES,
            )
        else:
            await self._bot.delete_webhook()
            self._tasks.spawn(self._poll(), name="polling")

    def outbox(self, message: IncomingMessage) -> TelegramOutbox:
        try:
            chat_id, thread_id, reply_to = decode_address(message.reply_address)
        except (ValueError, KeyError, TypeError):
            chat_id, thread_id, reply_to = int(message.conversation.chat), None, None
        return TelegramOutbox(
            self._bot,
            chat_id,
            thread_id=thread_id,
            reply_to=reply_to,
            edit_interval=self._config.edit_interval,
            renderer=self._renderer,
            delivery=self._delivery,
            private=message.conversation.kind is ChatKind.PRIVATE,
            drafts=self._drafts,
            files=self._files,
        )

    async def stop_receiving(self) -> None:
        """Stops polling (confirming the offset of every accepted update) or the webhook."""
        if not self._receiving:
            return
        self._receiving = False
        if self._receiver is not None:
            self._receiver.accepting = False
        await self._tasks.aclose()
        if not self._webhook and self._offset is not None:
            with contextlib.suppress(TelegramError):
                # Confirms everything below the offset to Telegram.
                await self._get_updates(offset=self._offset, timeout=0, limit=1)

    async def aclose(self) -> None:
        if not self._started:
            return
        await self.stop_receiving()
        self._started = False
        await self._files.aclose()
        with contextlib.suppress(Exception):
            await self._bot.shutdown()

    async def _register_commands(self) -> None:
        commands = [BotCommand(cmd.lstrip("/"), desc) for cmd, desc in self._commands]
        try:
            await self._bot.set_my_commands(commands)
        except TelegramError as exc:
            # The command menu is a convenience; typed commands work without it.
            log.warning("telegram: setMyCommands failed: %s", exc)

    async def _poll(self) -> None:
        """getUpdates until stopped; the offset moves past an update only once accepted."""
        backoff = 1.0
        while self._receiving:
            try:
                batch = await self._get_updates(
                    offset=self._offset,
                    timeout=POLL_TIMEOUT,
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except InvalidToken:
                log.error("telegram: the bot token was revoked; polling stopped")
                self._receiving = False
                return
            except Conflict:
                log.warning(
                    "telegram: another process is polling this bot token (409 Conflict); "
                    "run one poller per token, or use mode: webhook behind a load balancer"
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc))
                continue
            except (NetworkError, TelegramError) as exc:
                log.warning(
                    "telegram: polling failed (%s); retrying in %gs", one_line(exc), backoff
                )
            else:
                backoff = 1.0
                if not await self._take(batch):
                    await asyncio.sleep(1.0)  # the engine could not take it; try again
                continue
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _get_updates(self, **params: Any) -> Any:
        """getUpdates as raw JSON: `Bot.get_updates` parses the whole batch at
        once, so one malformed update would block every update behind it."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Please use 'Bot.getUpdates'", PTBUserWarning)
            return await self._bot.do_api_request(
                "getUpdates", api_kwargs=params, read_timeout=params.get("timeout", 0) + 10
            )

    async def _take(self, batch: Any) -> bool:
        """Accept a batch in order; False at the first update the engine did not take."""
        for data in batch if isinstance(batch, list) else []:
            update_id = data.get("update_id") if isinstance(data, dict) else None
            if not isinstance(update_id, int):
                log.warning("telegram: skipped an update without an update_id")
                continue
            if not await self._receive(data):
                return False
            self._offset = update_id + 1
        return True

    async def _receive(self, data: dict[str, Any]) -> bool:
        """True once the update is in the inbox (or needs no answer)."""
        if self._me is None or not self._receiving:
            return False
        try:
            update = Update.de_json(data, self._bot)
        except Exception as exc:
            log.warning("telegram: dropped a malformed update (%s)", one_line(exc))
            return True
        try:
            message = normalise(update, self._me, mention_rule=self._mention_rule)
        except Exception as exc:
            log.warning("telegram: dropped an update it could not read (%s)", one_line(exc))
            return True
        if message is None:
            return True
        taken = await take("telegram", self._handler, message, refusals=self._refusals)
        return taken is not Taken.REFUSED
