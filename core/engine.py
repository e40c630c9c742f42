"""The conversation engine: every platform hands it messages through `accept`.

Per message: accept (durable inbox, drops redeliveries) -> schedule (the
`ConversationScheduler` decides when: one answer per conversation at a time,
oldest first) -> route (access, command, too late, else `Answerer`: session,
provider, delivery, one store commit that also closes the inbox entry) ->
close (`Outcomes`, the one place an entry is closed and counted) -> drain.
The engine knows no platform, no SDK and no replica: answers go to the
`Outbox` a platform builds for a message (`attach`), so a message received
before a restart (or by another replica) can be answered here (`resume`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from chatbridge.core.access import AccessPolicy
from chatbridge.core.answer import Answerer
from chatbridge.core.clock import Clock, SystemClock
from chatbridge.core.commands import CommandContext, parse_command, run_command
from chatbridge.core.delivery import send_text
from chatbridge.core.incoming import clean_text
from chatbridge.core.limits import LimitGate
from chatbridge.core.media import MediaDesk, clean_attachments
from chatbridge.core.metrics import Metrics
from chatbridge.core.models import InboxEntry, IncomingMessage
from chatbridge.core.outcome import Outcome, Outcomes
from chatbridge.core.places import PlaceSettings, ScopeResolver, SessionModels
from chatbridge.core.ports import Outbox, Provider, Transcriber
from chatbridge.core.ports.scheduling import ConversationScheduler
from chatbridge.core.ports.store import LeaseLost, Store, StoreError
from chatbridge.core.scheduling.local import LocalScheduler
from chatbridge.core.settings import EngineSettings
from chatbridge.core.texts import COMMANDS

__all__ = ["Engine", "EngineSettings", "NotAccepting"]

log = logging.getLogger(__name__)

OutboxFactory = Callable[[IncomingMessage], Outbox]


class NotAccepting(Exception):
    """The engine is shutting down; the platform must not acknowledge the message."""


class Engine:
    """Owns sessions, rings, bridging, commands, access and the inbox; the
    scheduler (in-process by default) owns ordering, leases and cancelling."""

    def __init__(
        self,
        settings: EngineSettings,
        *,
        store: Store,
        provider: Provider,
        access: AccessPolicy | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        scheduler: ConversationScheduler | None = None,
        places: ScopeResolver | None = None,
        transcriber: Transcriber | None = None,
        limits: LimitGate | None = None,
    ) -> None:
        """`places` resolves each message's scopes; without it every place
        has `settings` and `provider`."""
        self.settings = settings
        self.store = store
        self.provider = provider
        self.places = places or ScopeResolver(base=settings, provider=provider)
        self.access = access or AccessPolicy()
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.commands: tuple[tuple[str, str], ...] = COMMANDS
        self.limits = limits
        self.scheduler: ConversationScheduler = scheduler or LocalScheduler()
        self.scheduler.bind(self)
        self._outcomes = Outcomes(store, self.metrics)
        self._session_models = SessionModels()
        self.media = MediaDesk(transcriber=transcriber)  # attachments; images of live sessions
        self._answerer = self._answerer_for(self.access)
        self._outboxes: dict[str, OutboxFactory] = {}
        self._given: dict[str, Outbox] = {}  # inbox key -> outbox passed to `handle`
        self._finished: dict[str, asyncio.Future[None]] = {}
        self._draining = False
        # A message without a platform ID gets a key unique across processes:
        # random per engine, counted within it (no random draw per message).
        self._local_prefix = f"{uuid.uuid4().hex}-"
        self._local_ids = itertools.count()

    def _answerer_for(self, access: AccessPolicy) -> Answerer:
        return Answerer(
            store=self.store,
            clock=self.clock,
            access=access,
            metrics=self.metrics,
            session_models=self._session_models,
            media=self.media,
            limits=self.limits,
        )

    def reconfigure(
        self,
        settings: EngineSettings,
        *,
        provider: Provider,
        access: AccessPolicy,
        places: ScopeResolver | None = None,
        limits: LimitGate | None = None,
    ) -> Provider:
        """Swap in a reloaded config (scopes too) for every message not yet
        being answered.

        Answers in flight finish with what they started with; returns the
        previous provider, which the caller closes once the engine is done.
        New limits apply to the next message; the counters are the store's
        and stay.
        """
        old = self.provider
        self.settings, self.provider, self.access = settings, provider, access
        if limits is not None:
            self.limits = limits
        self.places = places or ScopeResolver(base=settings, provider=provider)
        self._answerer = self._answerer_for(access)
        return old

    def requires_mention(self, place: tuple[str, ...]) -> bool:
        """The `MentionRule` of the current config: adapters ask it before an
        unaddressed group message may reach the inbox."""
        return self.places.requires_mention(place)

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
        entry = self._entry(key, message)
        if not await self.store.inbox_add(entry):
            self._redelivered(entry.message)
            return False
        await self.scheduler.submit(entry)
        return True

    def _entry(self, key: str, message: IncomingMessage) -> InboxEntry:
        """`message` as its inbox entry, received now."""
        # Any Unicode a platform hands us (lone surrogates, NUL, controls) is
        # made safe before it is stored, so no store or SDK can choke on it.
        text, attachments = clean_text(message.text), clean_attachments(message)
        if text != message.text or attachments != message.attachments:
            message = dataclasses.replace(message, text=text, attachments=attachments)
        return InboxEntry(key, message, received_at=self._received_at(message))

    def _received_at(self, message: IncomingMessage) -> float:
        now = self.clock.now()
        # A message fetched late (Discord catch-up) is as old as its user's send.
        return min(now, message.sent_at) if message.sent_at else now

    def _redelivered(self, message: IncomingMessage) -> None:
        log.info("dropped redelivered event %s", message.event_id)
        scope = self.places.for_message(message).metric_scope
        self.metrics.count(message.conversation.platform, Outcome.DUPLICATE.value, scope=scope)

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        """Accept `message`, answer it into `outbox`; returns once that is done.

        For callers that own the outbox of one message in one process (the
        console, tests); platforms use `accept` and `attach`.
        """
        key = self._inbox_key(message)
        await self._answered_into(outbox, key, self._accept(message, key))

    async def handle_all(
        self, messages: Sequence[IncomingMessage], outbox: Outbox, *, going: Callable[[], bool]
    ) -> None:
        """`handle` each of `messages` in turn, the next once the one before
        is done, as if typed one after another, but with all of them written
        to the inbox first in one store write (`inbox_add_many`): a console's
        piped lines of one read cost one write, not one each. Each is stored
        before it is answered; killed before its turn, it is answered after
        the restart (`resume`), as any stored message is.

        `going()` is asked before each: once False (the console's reader
        left) the rest, stored but not started, are closed unanswered
        (CANCELLED). A message is scheduled as `handle` does when its turn
        comes, with that moment as its `received_at` (so `redeliver_within`
        counts from it, as it does for `handle`); the stored time is the
        read's. In cancel mode, and with a scheduler that reads the shared
        inbox (which would see them all pending at once), each is handled
        on its own instead.
        """
        if len(messages) == 1 or self.settings.cancel_on_new_message or self.scheduler.reads_inbox:
            for message in messages:
                if not going():
                    return
                await self.handle(message, outbox)
            return
        # A command goes last in its write: the lines after a /forget are
        # stored after it has run, so it cannot erase what it never saw.
        start = 0
        while start < len(messages) and going():
            end = next(
                (n + 1 for n in range(start, len(messages)) if parse_command(messages[n].text)),
                len(messages),
            )
            await self._handle_written_together(messages[start:end], outbox, going)
            start = end

    async def _handle_written_together(
        self, messages: Sequence[IncomingMessage], outbox: Outbox, going: Callable[[], bool]
    ) -> None:
        if self._draining:
            raise NotAccepting("shutting down")
        entries = [self._entry(self._inbox_key(m), m) for m in messages]
        added = await self.store.inbox_add_many(entries)
        for entry, new in zip(entries, added, strict=True):
            if not new:
                self._redelivered(entry.message)
            elif self._draining:  # the rest stay in the inbox for the restart
                raise NotAccepting("shutting down")
            elif not going():
                await self.close(entry, Outcome.CANCELLED)
            else:
                turn = InboxEntry(entry.key, entry.message, self._received_at(entry.message))
                await self._answered_into(outbox, turn.key, self.scheduler.submit(turn))

    async def _answered_into(self, outbox: Outbox, key: str, submitted: Awaitable[bool]) -> None:
        """Await `submitted` (the entry `key` accepted or scheduled: True) with
        its answer going to `outbox`; returns once it is done."""
        done = asyncio.get_running_loop().create_future()
        self._given[key], self._finished[key] = outbox, done
        try:
            if await submitted:
                # Not shielded: the answer runs in the scheduler's task either
                # way, and `close` sets only a waiter that is still pending.
                await done
        finally:
            self._given.pop(key, None)
            self._finished.pop(key, None)

    async def resume(self, *, only: Callable[[IncomingMessage], bool] | None = None) -> int:
        """Schedule what the inbox holds from before a restart, oldest first,
        for every attached platform (and, with `only`, the messages it
        selects), then start the scheduler's background work; returns how
        many were scheduled."""
        count = 0
        for entry in await self.store.inbox_pending():
            if only is not None and not only(entry.message):
                continue
            if self.serves(entry) and await self.scheduler.submit(entry, fresh=False):
                log.info("answering %s left from before the restart", entry.key)
                count += 1
        await self.scheduler.start()
        return count

    def _inbox_key(self, message: IncomingMessage) -> str:
        platform = message.conversation.platform
        if message.event_id:
            return f"{platform}:{message.event_id}"
        return f"{platform}:local-{self._local_prefix}{next(self._local_ids):x}"

    # -- what the scheduler asks (`ConversationWork`) ---------------------------

    def serves(self, entry: InboxEntry) -> bool:
        return entry.message.conversation.platform in self._outboxes or entry.key in self._given

    def ordered(self, entry: InboxEntry) -> bool:
        return parse_command(entry.message.text) is None

    def supersedes(self, entry: InboxEntry) -> bool:
        return self.settings.cancel_on_new_message and self.ordered(entry)

    async def run(self, entry: InboxEntry, fence: int) -> None:
        """Answer one entry into its outbox and close it with its outcome.

        Whatever goes wrong costs this entry one sentence to the user and
        closes it as failed, so it is never answered again (not by a sweep,
        not after a restart); only a lost lease leaves it to the new holder.
        """
        message = entry.message
        outbox = self._given.get(entry.key) or self._outbox_of(message)
        if outbox is None:
            log.error("no outbox for %s; it stays in the inbox", entry.key)
            await self.close(entry, Outcome.LEFT)
            return
        started = time.monotonic()
        place = self.places.for_message(message)  # once per message; every consumer reads it
        try:
            outcome = await self._route(entry, outbox, fence, place)
        except LeaseLost as exc:
            # Like a lost race: the new holder finishes the entry (it stays pending).
            log.warning("%s", exc)
            outcome = Outcome.LEFT
        except StoreError as exc:
            # The store (a Redis outage, a full disk) failed before an answer
            # could be stored; the user hears so instead of silence.
            log.error("store failed on a message in %s: %s", message.conversation.chat_id, exc)
            await self._tell(outbox, "store_failed", place)
            outcome = Outcome.FAILED
        except Exception as exc:  # a bug must cost one answer, never the process
            log.error("answering %s failed: %s", entry.key, exc, exc_info=True)
            await self._tell(outbox, "internal_error", place)
            outcome = Outcome.FAILED
        await self.close(entry, outcome, place)
        if outcome is Outcome.ANSWERED:
            platform = message.conversation.platform
            self.metrics.observe_reply(platform, time.monotonic() - started)

    async def close(
        self, entry: InboxEntry, outcome: Outcome, place: PlaceSettings | None = None
    ) -> None:
        """Close `entry` with `outcome` (`Outcomes.close`) and wake its `handle`."""
        scope = (place or self.places.for_message(entry.message)).metric_scope
        platform = entry.message.conversation.platform
        await self._outcomes.close(platform, entry.key, outcome, scope=scope)
        waiter = self._finished.get(entry.key)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _tell(self, outbox: Outbox, key: str, place: PlaceSettings) -> None:
        """One sentence about a failure; if even that fails, the log has it."""
        try:
            await send_text(outbox, place.settings.say(key))
        except Exception as exc:
            log.warning("could not tell the user (%s): %s", key, exc)

    def _outbox_of(self, message: IncomingMessage) -> Outbox | None:
        factory = self._outboxes.get(message.conversation.platform)
        return factory(message) if factory is not None else None

    async def _route(
        self, entry: InboxEntry, outbox: Outbox, fence: int, place: PlaceSettings
    ) -> Outcome:
        message, settings = entry.message, place.settings
        conversation = message.conversation
        if not self.access.allowed(conversation):
            log.info("denied %s in %s", conversation.user_id, conversation.chat_id)
            if message.addressed:  # chatter where no mention is needed gets no denial
                await send_text(outbox, settings.say("denied", user_id=conversation.user_id))
            return Outcome.DENIED
        command = parse_command(message.text)
        if command is not None:
            context = self._command_context(place)
            await send_text(outbox, await run_command(command, message, context))
            return Outcome.COMMAND
        late = self.clock.now() - entry.received_at > settings.redeliver_within
        if late and entry.answer is None:
            log.info("%s is too old to answer; sending a notice", entry.key)
            said = message.text or ", ".join(a.name for a in message.attachments)
            preview = " ".join(said.split())[:60]
            await send_text(outbox, settings.say("late", preview=preview))
            return Outcome.LATE
        return await self._answerer.answer(entry, outbox, self._cut, place=place, fence=fence)

    def _cut(self) -> bool:
        """True when a cancelled reply was cut by shutdown (it stays in the inbox)."""
        return self._draining

    def _command_context(self, place: PlaceSettings) -> CommandContext:
        return CommandContext(
            store=self.store,
            access=self.access,
            clock=self.clock,
            settings=place.settings,
            model=place.model_label,
            control=self,
            last_usage=self.metrics.last_usage,
            scope=place.scope,
            limits=self.limits,
            place=place,
        )

    # -- /new and /forget (`ConversationControl`), draining ---------------------

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Wait for a conversation's turn (`ConversationControl`)."""
        async with self.scheduler.hold(key):
            yield

    def cancel(self, key: str) -> None:
        """Stop the reply in flight for a conversation (its HTTP stream closes)."""
        self.scheduler.cancel(key)

    async def drain(self, grace: float) -> None:
        """Stop accepting; let answers in flight (and queued ones) finish for up
        to `grace` s, then cut the rest: they stay in the inbox for the restart."""
        self._draining = True
        await self.scheduler.drain(grace)
