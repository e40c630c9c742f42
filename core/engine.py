"""The conversation engine: every platform hands it messages through `accept`.

Per message: inbox (durable, drops redeliveries) -> access -> command ->
per-conversation order -> session (TTL, bridging) -> provider -> delivery ->
one store commit that also marks the inbox entry done. The engine knows no
platform and no SDK: answers go to the `Outbox` a platform builds for a
message (`attach`), so a message received before a restart can be answered
after it (`resume`).

Replicas: with leases shared by several processes (`ConversationLeases` in
Redis, see `core.store._redis_lease`) every replica sees the whole inbox. The
holder of a conversation's lease re-checks that its entry is still pending
and that no older entry of the conversation is, so a message is answered
once and in order wherever it arrived; a periodic sweep (`start_sweeping`)
picks up what a dead replica left, and the commit's fence stops a holder
whose lease expired from writing (`LeaseLost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from chatbridge.core.access import AccessPolicy
from chatbridge.core.answer import Answerer
from chatbridge.core.clock import Clock, SystemClock
from chatbridge.core.commands import CommandContext, parse_command, run_command
from chatbridge.core.delivery import send_text
from chatbridge.core.incoming import clean_text
from chatbridge.core.limits import LimitGate
from chatbridge.core.metrics import Metrics
from chatbridge.core.models import InboxEntry, IncomingMessage
from chatbridge.core.ordering import CancelNotices, ConversationLeases, KeyedLocks, LocalNotices
from chatbridge.core.ports import Outbox, Provider
from chatbridge.core.settings import EngineSettings
from chatbridge.core.store.base import LeaseLost, Store, StoreError
from chatbridge.core.texts import COMMANDS

__all__ = ["Engine", "EngineSettings", "NotAccepting"]

log = logging.getLogger(__name__)

OutboxFactory = Callable[[IncomingMessage], Outbox]

DEFAULT_LEASE_TTL = 30.0
_RETRY_OLDER = 0.1  # s between looks while an older message of the conversation is pending


class NotAccepting(Exception):
    """The engine is shutting down; the platform must not acknowledge the message."""


class Engine:
    """Owns sessions, rings, bridging, commands, access, the inbox and ordering."""

    def __init__(
        self,
        settings: EngineSettings,
        *,
        store: Store,
        provider: Provider,
        access: AccessPolicy | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        leases: ConversationLeases | None = None,
        notices: CancelNotices | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        limits: LimitGate | None = None,
    ) -> None:
        """`leases` shared with other replicas (Redis) make this a replica:
        `resume` then also starts the sweep every `lease_ttl` seconds, which
        must be the leases' ttl. Without them ordering is in-process."""
        self.settings = settings
        self.store = store
        self.provider = provider
        self.access = access or AccessPolicy()
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.commands: tuple[tuple[str, str], ...] = COMMANDS
        self._replicated = leases is not None
        # In-process locks unless shared (Redis) leases were given.
        self._leases: ConversationLeases = leases if leases is not None else KeyedLocks()
        self._notices: CancelNotices = notices if notices is not None else LocalNotices()
        self._lease_ttl = lease_ttl
        self.limits = limits
        self._background: set[asyncio.Task[None]] = set()
        self._superseded: dict[str, float] = {}  # cancel mode: newest received_at elsewhere
        self._inflight_at: dict[str, float] = {}  # received_at of the reply in self._inflight
        self._answerer = Answerer(
            settings,
            store=store,
            provider=provider,
            clock=self.clock,
            access=self.access,
            metrics=self.metrics,
            limits=limits,
        )
        self._outboxes: dict[str, OutboxFactory] = {}
        self._given: dict[str, Outbox] = {}  # inbox key -> outbox passed to `handle`
        self._finished: dict[str, asyncio.Future[None]] = {}
        self._scheduled: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._inflight: dict[str, asyncio.Task[str]] = {}
        self._newest: dict[str, int] = {}  # cancel mode: message count per conversation
        self._draining = False

    def reconfigure(
        self,
        settings: EngineSettings,
        *,
        provider: Provider,
        access: AccessPolicy,
        limits: LimitGate | None = None,
    ) -> Provider:
        """Swap in a reloaded config for every message not yet being answered.

        Answers in flight finish with what they started with; returns the
        previous provider, which the caller closes once the engine is done.
        New limits apply to the next message; the counters are the store's
        and stay.
        """
        old = self.provider
        self.settings, self.provider, self.access = settings, provider, access
        if limits is not None:
            self.limits = limits
        self._answerer = Answerer(
            settings,
            store=self.store,
            provider=provider,
            clock=self.clock,
            access=access,
            metrics=self.metrics,
            limits=self.limits,
        )
        return old

    # -- intake ---------------------------------------------------------------

    def attach(self, platform: str, outboxes: OutboxFactory) -> None:
        """Answers to messages from `platform` go to `outboxes(message)`."""
        self._outboxes[platform] = outboxes

    async def accept(self, message: IncomingMessage) -> bool:
        """Record `message` in the inbox and schedule its answer (`MessageHandler`).

        Returns once the inbox holds it; False for a redelivery. Raises
        `StoreError` when the inbox cannot take it and `NotAccepting` while
        shutting down: the platform must then not acknowledge the message.
        """
        return await self._accept(message, self._inbox_key(message))

    async def _accept(self, message: IncomingMessage, key: str) -> bool:
        if self._draining:
            raise NotAccepting("shutting down")
        # Any Unicode a platform hands us (lone surrogates, NUL, controls) is
        # made safe before it is stored, so no store or SDK can choke on it.
        message = dataclasses.replace(message, text=clean_text(message.text))
        now = self.clock.now()
        # A message fetched late (Discord catch-up) is as old as its user's send.
        received_at = min(now, message.sent_at) if message.sent_at else now
        entry = InboxEntry(key, message, received_at=received_at)
        if not await self.store.inbox_add(entry):
            log.info("dropped redelivered event %s", message.event_id)
            self.metrics.count(message.conversation.platform, "duplicate")
            return False
        self._schedule(entry)
        if self.settings.cancel_on_new_message and parse_command(message.text) is None:
            conversation = message.conversation.key
            await self._notices.publish(conversation, received_at=entry.received_at)
        return True

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        """Accept `message`, answer it into `outbox`; returns once that is done.

        For callers that own the outbox of one message (the console, tests);
        platforms use `accept` and `attach`.
        """
        key = self._inbox_key(message)
        done = asyncio.get_running_loop().create_future()
        self._given[key], self._finished[key] = outbox, done
        try:
            if await self._accept(message, key):
                await asyncio.shield(done)
        finally:
            self._given.pop(key, None)
            self._finished.pop(key, None)

    async def resume(self, *, only: Callable[[IncomingMessage], bool] | None = None) -> int:
        """Schedule what the inbox holds from before a restart, oldest first,
        for every attached platform (and, with `only`, the messages it
        selects); returns how many were scheduled."""
        count = 0
        for entry in await self.store.inbox_pending():
            platform = entry.message.conversation.platform
            if only is not None and not only(entry.message):
                continue
            if entry.key not in self._scheduled and platform in self._outboxes:
                log.info("answering %s left from before the restart", entry.key)
                self._schedule(entry)
                count += 1
        if self._replicated and not self._background:
            self.start_sweeping(self._lease_ttl)
        return count

    def start_sweeping(self, interval: float) -> None:
        """Every `interval` s, schedule pending entries older than the lease ttl
        that are not scheduled here (a dead replica's), and listen for other
        replicas' cancel notices; both stop in `drain`."""
        for work in (self._sweep(interval), self._listen()):
            task = asyncio.create_task(work)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _sweep(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("inbox sweep failed: %s", exc)

    async def sweep(self) -> int:
        """One sweep (see `start_sweeping`); returns how many were scheduled."""
        now, count = self.clock.now(), 0
        for entry in await self.store.inbox_pending():
            stale = now - entry.received_at > self._lease_ttl
            platform = entry.message.conversation.platform
            if stale and entry.key not in self._scheduled and platform in self._outboxes:
                log.info("answering %s, which another replica left", entry.key)
                self._schedule(entry)
                count += 1
        old = now - self.settings.redeliver_within
        self._superseded = {k: at for k, at in self._superseded.items() if at > old}
        return count

    async def _listen(self) -> None:
        async with self._notices.listen(self._on_notice):
            await asyncio.Event().wait()  # until drain cancels it

    def _on_notice(self, key: str, received_at: float) -> None:
        """Another replica accepted a newer message for `key`: older ones here
        are dropped (queued) or cancelled (in flight)."""
        self._superseded[key] = max(received_at, self._superseded.get(key, received_at))
        if self._inflight_at.get(key, received_at) < received_at:
            self.cancel(key)

    def _inbox_key(self, message: IncomingMessage) -> str:
        platform = message.conversation.platform
        if message.event_id:
            return f"{platform}:{message.event_id}"
        return f"{platform}:local-{uuid.uuid4().hex}"

    def _schedule(self, entry: InboxEntry) -> None:
        key = entry.message.conversation.key
        ticket = 0
        if self.settings.cancel_on_new_message and parse_command(entry.message.text) is None:
            ticket = self._newest[key] = self._newest.get(key, 0) + 1
            self.cancel(key)
        self._scheduled.add(entry.key)
        task = asyncio.create_task(self._process(entry, ticket))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, key=entry.key))

    def _done(self, task: asyncio.Task[None], *, key: str) -> None:
        self._tasks.discard(task)
        self._scheduled.discard(key)
        waiter = self._finished.get(key)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- per message ----------------------------------------------------------

    async def _process(self, entry: InboxEntry, ticket: int) -> None:
        message = entry.message
        platform = message.conversation.platform
        outbox = self._given.get(entry.key) or self._outbox_of(message)
        if outbox is None:
            log.error("no outbox for %s; it stays in the inbox", entry.key)
            return
        started = time.monotonic()
        try:
            outcome = await self._route(entry, outbox, ticket)
        except StoreError as exc:
            # The store (a Redis outage, a full disk) failed before an answer
            # could be stored; the user hears so instead of silence.
            log.error("store failed on a message in %s: %s", message.conversation.chat_id, exc)
            await send_text(outbox, self.settings.say("store_failed"))
            outcome = "failed"
        except asyncio.CancelledError:
            log.info("%s left in the inbox for after the restart", entry.key)
            raise
        except Exception as exc:  # a bug must cost one answer, never the process
            log.error("answering %s failed: %s", entry.key, exc, exc_info=True)
            await send_text(outbox, self.settings.say("internal_error"))
            outcome = "failed"
        self.metrics.count(platform, outcome)
        if outcome == "answered":
            self.metrics.reply_seconds.labels(platform=platform).observe(time.monotonic() - started)

    def _outbox_of(self, message: IncomingMessage) -> Outbox | None:
        factory = self._outboxes.get(message.conversation.platform)
        return factory(message) if factory is not None else None

    async def _route(self, entry: InboxEntry, outbox: Outbox, ticket: int) -> str:
        """Answer one inbox entry; returns its outcome (a `core.metrics.OUTCOMES` name)."""
        message, settings = entry.message, self.settings
        conversation = message.conversation
        if not self.access.allowed(conversation):
            log.info("denied %s in %s", conversation.user_id, conversation.chat_id)
            await send_text(outbox, settings.say("denied", user_id=conversation.user_id))
            await self.store.inbox_done(entry.key)
            return "denied"
        command = parse_command(message.text)
        if command is not None:
            await send_text(outbox, await run_command(command, message, self._command_context()))
            await self.store.inbox_done(entry.key)
            return "command"
        late = self.clock.now() - entry.received_at > settings.redeliver_within
        if late and entry.answer is None:
            log.info("%s is too old to answer; sending a notice", entry.key)
            preview = " ".join(message.text.split())[:60]
            await send_text(outbox, settings.say("late", preview=preview))
            await self.store.inbox_done(entry.key)
            return "late"
        outcome = await self._run_exclusive(
            entry,
            ticket,
            lambda fence: self._answerer.answer(entry, outbox, self._cut, fence=fence),
        )
        if outcome == "cancelled":
            await self.store.inbox_done(entry.key)
        return outcome

    def _cut(self) -> bool:
        """True when a cancelled reply was cut by shutdown (it stays in the inbox)."""
        return self._draining

    def _command_context(self) -> CommandContext:
        provider = self.provider
        return CommandContext(
            store=self.store,
            access=self.access,
            clock=self.clock,
            settings=self.settings,
            model=f"{provider.model} ({provider.name})",
            control=self,
            last_usage=self.metrics.last_usage,
            limits=self.limits,
        )

    # -- ordering, cancelling, draining ----------------------------------------

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Wait for a conversation's turn (`ConversationControl`)."""
        async with self._leases.hold(key):
            yield

    def cancel(self, key: str) -> None:
        """Stop the reply in flight for a conversation (its HTTP stream closes)."""
        task = self._inflight.get(key)
        if task is not None and not task.done():
            task.cancel()

    async def drain(self, grace: float) -> None:
        """Stop accepting; let answers in flight (and queued ones) finish for up
        to `grace` s, then cut the rest: they stay in the inbox for the restart."""
        self._draining = True
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)

    async def _run_exclusive(
        self, entry: InboxEntry, ticket: int, work: Callable[[int], Coroutine[Any, Any, str]]
    ) -> str:
        """Run `work(fence)` once this conversation's earlier messages are done.

        In cancel mode a message that was overtaken while it waited for the
        lock is dropped (only the newest of a burst is answered). With shared
        leases an entry another replica finished meanwhile is a "duplicate",
        and one with an older entry of its conversation still pending waits
        for that one (outside the lease, so its holder can take it).
        """
        key = entry.message.conversation.key
        while True:
            async with self._leases.hold(key) as lease:
                if self._overtaken(entry, ticket):
                    return "cancelled"
                if self._replicated and not await self.store.inbox_is_pending(entry.key):
                    return "duplicate"
                if not (self._replicated and await self._older_pending(entry)):
                    return await self._run_held(entry, ticket, lease.fence, work)
            await asyncio.sleep(_RETRY_OLDER)

    def _overtaken(self, entry: InboxEntry, ticket: int) -> bool:
        key = entry.message.conversation.key
        if not ticket:
            return False
        return self._newest.get(key, 0) != ticket or entry.received_at < self._superseded.get(
            key, entry.received_at
        )

    async def _older_pending(self, entry: InboxEntry) -> bool:
        """True when an older entry of the conversation is pending (and young
        enough that a replica, or the sweep, is on it)."""
        key = entry.message.conversation.key
        oldest = self.clock.now() - 2 * self._lease_ttl - self.settings.redeliver_within
        for other in await self.store.inbox_pending():
            if other.key == entry.key:
                return False
            if other.message.conversation.key == key and other.received_at > oldest:
                return True
        return False

    async def _run_held(
        self,
        entry: InboxEntry,
        ticket: int,
        fence: int,
        work: Callable[[int], Coroutine[Any, Any, str]],
    ) -> str:
        key = entry.message.conversation.key
        task = asyncio.create_task(work(fence))
        self._inflight[key], self._inflight_at[key] = task, entry.received_at
        try:
            return await task
        except LeaseLost as exc:
            # Like a lost race: the new holder finishes the entry (it stays pending).
            log.warning("%s", exc)
            return "duplicate"
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._draining or (current is not None and current.cancelling()):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise
            log.info("reply in %s cancelled", key)  # superseded or /new
            return "cancelled"
        finally:
            if self._inflight.get(key) is task:
                del self._inflight[key]
                self._inflight_at.pop(key, None)
            if ticket and self._newest.get(key) == ticket and self._leases.users(key) == 1:
                self._newest.pop(key, None)
