"""The conversation engine: one `handle()` for every platform.

Order of checks for each message: redelivery -> access -> command ->
per-conversation lock -> session (TTL, bridging) -> provider -> delivery ->
one store commit. The engine knows no platform and no SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from core.access import AccessPolicy
from core.clock import Clock, SystemClock
from core.commands import CommandRunner, parse_command
from core.delivery import StreamingReply, send_text
from core.events import EventLog, LocalEvents
from core.memory import build_bridge, cut_summary, cut_text, neutralise, scope_of, visible_entries
from core.metrics import Metrics
from core.models import Exchange, IncomingMessage, MemoryEntry, Session, Turn, Usage
from core.ordering import KeyedLocks
from core.sessions import append_turns
from core.store.base import Store, StoreError
from core.texts import COMMANDS, say
from platforms.base import DeliveryError, Outbox
from providers.base import Prompt, Provider, ProviderError, TextDelta

__all__ = ["Engine", "EngineSettings"]

log = logging.getLogger(__name__)

TYPING_REFRESH = 4.0  # Telegram shows "typing" for ~5 s per call


@dataclass(frozen=True, slots=True)
class EngineSettings:
    system_prompt: str = "You are a helpful assistant."
    language: str = "de"
    timezone: tzinfo | None = None
    session_ttl: float = 30 * 60
    session_max_turns: int = 40
    cancel_on_new_message: bool = False
    max_age: float = 24 * 3600
    user_chars: int = 500
    summary_chars: int = 300
    inject_entries: int = 5


class Engine:
    """Owns sessions, rings, bridging, commands, access, dedupe and ordering."""

    def __init__(
        self,
        settings: EngineSettings,
        *,
        store: Store,
        provider: Provider,
        access: AccessPolicy | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.provider = provider
        self.access = access or AccessPolicy()
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.commands: list[tuple[str, str]] = list(COMMANDS)
        self.locks = KeyedLocks()
        self.events = events or LocalEvents()
        self._inflight: dict[str, asyncio.Task[str]] = {}
        self._newest: dict[str, int] = {}  # cancel mode: message count per conversation
        self._command_runner = CommandRunner(self)

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        """Answer one message; returns once the reply is delivered.

        Never raises for provider or delivery failures: the user gets a
        notice and the log gets the reason.
        """
        started = time.monotonic()
        platform = message.conversation.platform
        try:
            outcome = await self._dispatch(message, outbox)
        except StoreError as exc:
            # The store (a Redis outage, a full disk) failed before an answer
            # could be stored; the user hears so instead of silence.
            log.error("store failed on a message in %s: %s", message.conversation.chat_id, exc)
            await send_text(outbox, self.say("store_failed"))
            outcome = "failed"
        self.metrics.count(platform, outcome)
        if outcome == "answered":
            self.metrics.reply_seconds.labels(platform=platform).observe(time.monotonic() - started)

    async def _dispatch(self, message: IncomingMessage, outbox: Outbox) -> str:
        """Route one message; returns its outcome (a `core.metrics.OUTCOMES` name)."""
        conversation = message.conversation
        now = self.clock.now()
        if message.event_id and not await self.events.first_time(message.event_id, now):
            log.info("dropped redelivered event %s", message.event_id)
            return "duplicate"
        if not self.access.allowed(conversation):
            log.info("denied %s in %s", conversation.user_id, conversation.chat_id)
            await send_text(outbox, self.say("denied", user_id=conversation.user_id))
            return "denied"
        command = parse_command(message.text)
        if command is not None:
            await self._command_runner.run(command, message, outbox)
            return "command"
        key = conversation.key
        if self.settings.cancel_on_new_message:
            self._newest[key] = self._newest.get(key, 0) + 1
            self.cancel(key)
        return await self._run_exclusive(key, lambda: self._answer(message, outbox))

    def cancel(self, key: str) -> None:
        """Stop the reply in flight for a conversation (its HTTP stream closes)."""
        task = self._inflight.get(key)
        if task is not None and not task.done():
            task.cancel()

    async def drain(self, grace: float) -> None:
        """Let replies in flight finish for up to `grace` s, then cancel them."""
        tasks = [t for t in self._inflight.values() if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)

    async def _run_exclusive(self, key: str, work: Callable[[], Coroutine[Any, Any, str]]) -> str:
        """Run `work()` once this conversation's earlier messages are done.

        In cancel mode a message that was overtaken while it waited for the
        lock is dropped (only the newest of a burst is answered).
        """
        ticket = self._newest.get(key, 0)
        async with self.locks.hold(key):
            if self._newest.get(key, 0) != ticket:
                return "cancelled"
            task = asyncio.create_task(work())
            self._inflight[key] = task
            try:
                return await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    task.cancel()
                    raise
                log.info("reply in %s cancelled", key)  # superseded, /new or shutdown
                return "cancelled"
            finally:
                if self._inflight.get(key) is task:
                    del self._inflight[key]
                if self._newest.get(key) == ticket and self.locks.users(key) == 1:
                    self._newest.pop(key, None)

    def say(self, key: str, **values: object) -> str:
        return say(self.settings.language, key, **values)

    def today(self, now: float) -> str:
        return datetime.fromtimestamp(now, self.settings.timezone).date().isoformat()

    async def _open_turn(self, message: IncomingMessage, now: float) -> tuple[Session, str]:
        """The session to continue (or a new one) and the user turn to send."""
        conversation = message.conversation
        session = await self.store.load_session(conversation.key)
        if session is not None and not session.expired(now, self.settings.session_ttl):
            return session, neutralise(message.text)
        ring_user = self.access.ring_user(conversation)
        entries: list[MemoryEntry] = []
        if self.settings.inject_entries:
            ring = await self.store.ring(ring_user, since=now - self.settings.max_age)
            entries = visible_entries(ring, conversation)[-self.settings.inject_entries :]
        content = build_bridge(
            entries,
            neutralise(message.text),
            now=now,
            language=self.settings.language,
            tz=self.settings.timezone,
        )
        fresh = Session(key=conversation.key, user=ring_user, started_at=now, last_active=now)
        return fresh, content

    async def _answer(self, message: IncomingMessage, outbox: Outbox) -> str:
        now = self.clock.now()
        session, content = await self._open_turn(message, now)
        prompt = Prompt(
            system=self.settings.system_prompt,
            messages=(*session.turns, Turn("user", content)),
        )
        reply = StreamingReply(outbox)
        try:
            try:
                usage = await self._stream(prompt, reply, outbox)
            except ProviderError as exc:
                await self._report_failure(exc, reply)
                return "failed"
            answer = reply.text.strip()
            if not answer:
                await reply.finish(self.say("empty_answer"))
                return "failed"
            await reply.finish()
        except DeliveryError as exc:
            log.warning("reply to %s not delivered: %s", message.conversation.chat_id, exc)
            return "undelivered"
        finally:
            await reply.aclose()
        self.metrics.tokens.labels(direction="input").inc(usage.input_tokens)
        self.metrics.tokens.labels(direction="output").inc(usage.output_tokens)
        # The user has seen the answer: a cancel from here on (/new, a newer
        # message, shutdown) must not lose the exchange, so the commit is shielded.
        await asyncio.shield(self._remember(message, session, content, answer, usage, now))
        return "answered"

    async def _stream(self, prompt: Prompt, reply: StreamingReply, outbox: Outbox) -> Usage:
        usage = Usage()
        async with _typing_while_silent(outbox, reply):
            async for event in self.provider.stream(prompt):
                if isinstance(event, TextDelta):
                    await reply.push(event.text)
                else:
                    usage = usage + event.usage
        return usage

    async def _report_failure(self, exc: ProviderError, reply: StreamingReply) -> None:
        log.warning("no answer: %s", exc)
        try:
            if reply.text.strip():
                notice = self.say("interrupted", providers=exc.provider or self.provider.name)
                await reply.finish(f"{reply.text.rstrip()}\n\n{notice}")
            else:
                await reply.finish(self.say("all_failed", providers=self._chain_names()))
        except DeliveryError as delivery_exc:
            log.warning("failure notice not delivered: %s", delivery_exc)

    def _chain_names(self) -> str:
        """ "main, backup" for a fallback chain; the provider's name otherwise."""
        chain = getattr(self.provider, "providers", None) or [self.provider]
        return ", ".join(provider.name for provider in chain)

    async def _remember(
        self,
        message: IncomingMessage,
        session: Session,
        content: str,
        answer: str,
        usage: Usage,
        now: float,
    ) -> None:
        conversation = message.conversation
        settings = self.settings
        updated = append_turns(
            session,
            [Turn("user", content), Turn("assistant", answer)],
            now=self.clock.now(),
            max_turns=settings.session_max_turns,
        )
        entry = MemoryEntry(
            timestamp=now,
            user_message=cut_text(message.text, settings.user_chars),
            assistant_summary=cut_summary(answer, settings.summary_chars),
            session_name=conversation.key,
            user=updated.user,
            scope=scope_of(conversation),
        )
        try:
            await self.store.commit_exchange(
                Exchange(updated.user, updated, entry, usage, self.today(now))
            )
        except StoreError as exc:
            log.error("exchange answered but not stored: %s", exc)


@contextlib.asynccontextmanager
async def _typing_while_silent(outbox: Outbox, reply: StreamingReply) -> AsyncIterator[None]:
    """Keep the platform's typing indicator on until the first text shows."""

    async def keep_typing() -> None:
        while not reply.started:
            try:
                await outbox.typing()
            except Exception as exc:  # cosmetic: never let it end a good answer
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_REFRESH)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
