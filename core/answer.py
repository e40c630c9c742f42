"""Answering one message: session and bridge, provider stream, delivery, commit.

"Seen means stored": the final answer is recorded with its inbox entry before
its final delivery, and the ring entry, the session turns and marking the
entry done are one store transaction. After a crash an entry with a recorded
answer is finished by editing the messages already posted, never posted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from chatbridge.core.access import AccessPolicy
from chatbridge.core.answer_limits import AnswerLimits
from chatbridge.core.clock import Clock
from chatbridge.core.delivery import StreamingReply, send_text
from chatbridge.core.incoming import clean_text, cut_for_prompt
from chatbridge.core.ledger import Settlement
from chatbridge.core.limits import LimitGate, Meter
from chatbridge.core.links import People, Person
from chatbridge.core.media import MediaDesk, Prepared, accepted_media
from chatbridge.core.media._texts import media_say
from chatbridge.core.memory import (
    build_bridge,
    cut_summary,
    cut_text,
    neutralise,
    scope_of,
    visible_entries,
)
from chatbridge.core.metrics import Metrics
from chatbridge.core.models import (
    Conversation,
    Exchange,
    InboxEntry,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.core.outcome import Outcome
from chatbridge.core.places import PlaceSettings, SessionModels
from chatbridge.core.ports import (
    DeliveryError,
    MediaRejected,
    Outbox,
    Prompt,
    Provider,
    ProviderError,
    ProviderMisconfigured,
    TextDelta,
    in_progress_phase,
)
from chatbridge.core.ports.store import LeaseLost, Store, StoreError
from chatbridge.core.session_fit import fit_bridge, fit_session, fits
from chatbridge.core.sessions import append_turns
from chatbridge.core.settings import EngineSettings
from chatbridge.core.shielding import shielded

__all__ = ["Answerer"]

log = logging.getLogger(__name__)

CUT_NOTICE_TIMEOUT = 2.0  # a reply cut by shutdown gets this long to show its notice


class Answerer:
    """Turns one inbox entry into a delivered, remembered answer, with the
    settings and provider in force where it was sent (`PlaceSettings`)."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        access: AccessPolicy,
        metrics: Metrics,
        session_models: SessionModels | None = None,
        media: MediaDesk | None = None,
        limits: LimitGate | None = None,
    ) -> None:
        """`media` decides about attachments and keeps images of live sessions
        (shared across reloads, so the engine owns it); `limits` admits and
        settles each model request (`core.limits`)."""
        self._limits = (
            AnswerLimits(limits, store=store, access=access, metrics=metrics)
            if limits is not None
            else None
        )
        self._media = media if media is not None else MediaDesk()
        self._store = store
        self._clock = clock
        self._access = access
        self._people = People(access, store)  # the sender as a person (links, identities)
        self._metrics = metrics
        self._session_models = session_models or SessionModels()

    async def answer(
        self,
        entry: InboxEntry,
        outbox: Outbox,
        cut: Callable[[], bool],
        *,
        place: PlaceSettings,
        fence: int = 0,
    ) -> Outcome:
        """Returns the outcome (the caller closes the entry with it); `cut()`
        tells a shutdown from other cancels.

        `fence` is the conversation lease's ticket, checked by the commit: raises
        `LeaseLost` (the entry stays pending for the lease's new holder)."""
        now = self._clock.now()
        settings, provider = place.settings, place.provider
        sender = _Sender(self._people, entry.message.conversation)
        if self._limits is not None and entry.answer is None and entry.message.attachments:
            text = self._user_text(entry.message.text, settings)
            person = sender.fixed or (await sender.person()).key
            if await self._limits.refused_before_download(
                entry, outbox, place, text, person=person, fixed=sender.fixed
            ):
                return Outcome.REFUSED
        prepared = await self._prepare(entry, outbox, settings, provider)
        if not prepared.answerable:
            return Outcome.FAILED  # nothing left to ask: the notices said why
        session, content, rewritten = await self._open_turn(
            entry, now, place, prepared.text, sender
        )
        conversation_key = entry.message.conversation.key

        async def record_posted(sent: tuple[str, ...]) -> None:
            await self._store.inbox_progress(entry.key, sent=sent)

        # Recorded references let a restart edit instead of posting again;
        # where none outlives the process, recording them is a write for nothing.
        lasting = outbox.limits.edits_after_restart
        reply = StreamingReply(
            outbox, sent=entry.sent, on_posted=record_posted if lasting else None
        )
        usage = Usage()
        meter, admitted, completed = Meter(), None, False
        try:
            if entry.answer is None:
                earlier = self._media.live.attach(
                    conversation_key, session.started_at, session.turns
                )
                prompt = Prompt(
                    system=settings.system_prompt,
                    messages=(*earlier, Turn("user", content, parts=prepared.parts)),
                    cache_key=Prompt.cache_key_for(conversation_key),
                )
                if self._limits is not None:
                    admitted = await self._limits.admit(
                        entry, outbox, prompt, place, fixed=sender.fixed
                    )
                    if admitted is None:
                        return Outcome.REFUSED
                try:
                    try:
                        usage = await self._stream(provider, prompt, reply, outbox, meter)
                    except MediaRejected as exc:
                        self._media.live.drop(conversation_key)  # not to be refused again
                        prepared = await self._without_media(exc, prepared, outbox, settings)
                        usage = await self._stream(
                            provider, _text_only(prompt), reply, outbox, meter
                        )
                    completed = True
                except ProviderError as exc:
                    await self._report_failure(exc, reply, settings, provider)
                    return Outcome.FAILED
                answer = reply.text.strip()
                if not answer:
                    await reply.finish(settings.say("empty_answer"))
                    return Outcome.FAILED
                await self._store.inbox_progress(entry.key, sent=reply.sent, answer=answer)
            else:
                answer = entry.answer  # recorded before a crash; finish delivering it
            await reply.finish(answer)
            # Answered: the settlement rides in the exchange's commit (below).
            settlement = None
            if admitted is not None:
                assert self._limits is not None
                settlement = self._limits.settlement(admitted, meter, completed=completed)
                admitted = None
        except DeliveryError as exc:
            log.warning("reply to %s not delivered: %s", entry.message.conversation.chat_id, exc)
            await self._tell_undelivered(outbox, settings)
            return Outcome.UNDELIVERED
        except asyncio.CancelledError:
            if cut() and reply.started:
                await self._show_cut(reply, settings)
            raise
        finally:
            await reply.aclose()
            if admitted is not None:  # refused by the platform, failed or cancelled
                assert self._limits is not None
                await asyncio.shield(self._limits.settle(admitted, meter, completed=completed))
        self._metrics.count_usage(conversation_key, usage, scope=place.metric_scope)
        self._session_models.remember(conversation_key, place.fingerprint)
        self._media.live.remember(conversation_key, session.started_at, content, prepared.parts)
        # The user has seen the answer: a cancel from here on (/new, a newer
        # message, shutdown) must not lose the exchange, so the commit is shielded.
        stored = await shielded(
            self._remember(
                entry,
                session,
                content,
                answer,
                usage,
                now,
                settings,
                fence=fence,
                said=prepared.text,
                rewritten=rewritten,
                settlement=settlement,
            )
        )
        if not stored:
            await send_text(outbox, settings.say("not_stored"))
            return Outcome.NOT_STORED
        return Outcome.ANSWERED

    async def _tell_undelivered(self, outbox: Outbox, settings: EngineSettings) -> None:
        """One short notice, one attempt: the platform refused the answer itself."""
        try:
            await outbox.send(settings.say("undelivered"))
        except DeliveryError as exc:
            log.warning("the undelivered notice was refused too: %s", exc)

    async def _show_cut(self, reply: StreamingReply, settings: EngineSettings) -> None:
        notice = settings.say("cut_by_restart")
        with contextlib.suppress(DeliveryError, TimeoutError):
            await asyncio.wait_for(
                reply.finish(f"{reply.text.rstrip()}\n\n{notice}"), CUT_NOTICE_TIMEOUT
            )

    async def _prepare(
        self, entry: InboxEntry, outbox: Outbox, settings: EngineSettings, provider: Provider
    ) -> Prepared:
        """The message's attachments made into the turn's text and parts; their
        notices (and what a voice note said) go out first, unless this is an
        answer being finished after a crash (they went out before it)."""
        if not entry.message.attachments:  # nothing to fetch, decide or announce
            return Prepared(entry.message.text)
        prepared = await self._media.prepare(
            entry.message,
            outbox,
            settings=settings.media,
            language=settings.language,
            accepts=accepted_media(provider),
        )
        if entry.answer is None:
            for line in (*prepared.notices, prepared.heard):
                if line:
                    await send_text(outbox, line)
        return prepared

    async def _without_media(
        self, exc: MediaRejected, prepared: Prepared, outbox: Outbox, settings: EngineSettings
    ) -> Prepared:
        """The provider refused the images/PDFs: one sentence, then the text alone."""
        log.warning("the provider refused the attachments, answering the text: %s", exc)
        await send_text(outbox, media_say(settings.language, "image_rejected"))
        return Prepared(prepared.text, notices=prepared.notices, heard=prepared.heard)

    async def _open_turn(
        self, entry: InboxEntry, now: float, place: PlaceSettings, said: str, sender: _Sender
    ) -> tuple[Session, str, bool]:
        """The session to continue (or a new one) as this request carries it,
        the user turn to send, and whether the session's turns were rewritten
        (`core.session_fit`: trimmed to the budget, its head bridged);
        `said` is the message's text with its attachments' (`Prepared.text`).

        A session whose provider or model a reload changed is not continued:
        the new one bridges as after a gap. The bridge reads the person's ring
        (every linked ID's entries); the session, and so the new entry, stays
        filed under this ID's own key."""
        message = entry.message
        conversation = message.conversation
        settings = place.settings
        text = self._user_text(said, settings)

        def bridge(entries: Sequence[MemoryEntry], text: str, at: float | None) -> str:
            moment = now if at is None else at
            return build_bridge(
                entries, text, now=moment, language=settings.language, tz=settings.timezone
            )

        session = await self._store.load_session(conversation.key)
        live = session is not None and not session.expired(now, settings.session_ttl)
        if live and self._session_models.changed(conversation.key, place.fingerprint):
            log.info("provider or model changed by a reload; a new session starts")
            live = False
        limits = {
            "max_tokens": settings.session_max_tokens,
            "max_turns": settings.session_max_turns,
        }
        system = settings.system_prompt
        if session is not None and live:
            if fits(session.turns, text, system=system, **limits):
                return session, text, False
            fitted = fit_session(
                session.turns,
                text,
                system=system,
                ring=await self._visible_ring(conversation, now, settings, sender),
                key=conversation.key,
                started_at=session.started_at,
                inject_entries=settings.inject_entries,
                bridge=bridge,
                **limits,
            )
            s = session
            trimmed = Session(s.key, s.user, s.started_at, s.last_active, fitted.turns)
            return trimmed, fitted.content, fitted.rewritten
        entries: list[MemoryEntry] = []
        if settings.inject_entries:
            ring = await self._visible_ring(conversation, now, settings, sender)
            entries = ring[-settings.inject_entries :]
        content = fit_bridge(
            entries, text, system=system, max_tokens=settings.session_max_tokens, bridge=bridge
        )
        ring_user = self._access.ring_user(conversation)
        fresh = Session(key=conversation.key, user=ring_user, started_at=now, last_active=now)
        return fresh, content, False

    @staticmethod
    def _user_text(said: str, settings: EngineSettings) -> str:
        """The message's text as the user turn carries it: cleaned, cut, neutralised."""
        return neutralise(
            cut_for_prompt(clean_text(said), settings.max_message_chars, settings.language)
        )

    async def _visible_ring(
        self, conversation: Conversation, now: float, settings: EngineSettings, sender: _Sender
    ) -> list[MemoryEntry]:
        """The person's ring entries (every linked ID's) this conversation's
        audience may see, oldest first."""
        person = await sender.person()
        ring = await self._people.ring(person, since=now - settings.max_age)
        return visible_entries(ring, conversation)

    async def _stream(
        self,
        provider: Provider,
        prompt: Prompt,
        reply: StreamingReply,
        outbox: Outbox,
        meter: Meter,
    ) -> Usage:
        interval = outbox.limits.typing_interval
        if interval is None:  # no indicator: no task, no wrapper
            return await _relay(provider, prompt, reply, meter)
        async with _typing_while_silent(outbox, reply, interval):
            return await _relay(provider, prompt, reply, meter)

    async def _report_failure(
        self,
        exc: ProviderError,
        reply: StreamingReply,
        settings: EngineSettings,
        provider: Provider,
    ) -> None:
        """Log the failure in one line and tell the user in one sentence.

        A misconfigured provider (bad key, unknown model, rejected request) is
        an ERROR naming the config key to fix, and the user hears that the admin
        must fix it; anything else is a WARNING and "try again". No traceback:
        the provider's message already says what happened, without secrets.
        """
        needs_admin = isinstance(exc, ProviderMisconfigured)  # only a config change helps
        if needs_admin:
            log.error("no answer, the provider config needs fixing: %s", exc)
        else:
            log.warning("no answer: %s", exc)
        try:
            if reply.text.strip():
                notice = settings.say("interrupted", providers=exc.provider or provider.name)
                await reply.finish(f"{reply.text.rstrip()}\n\n{notice}")
            else:
                key = "misconfigured" if needs_admin else "all_failed"
                await reply.finish(settings.say(key, providers=provider.label))
        except DeliveryError as delivery_exc:
            log.warning("failure notice not delivered: %s", delivery_exc)

    async def _remember(
        self,
        entry: InboxEntry,
        session: Session,
        content: str,
        answer: str,
        usage: Usage,
        now: float,
        settings: EngineSettings,
        *,
        fence: int = 0,
        said: str | None = None,
        rewritten: bool = False,
        settlement: Settlement | None = None,
    ) -> bool:
        """Commit the exchange, which closes the entry; False if the store failed.

        `said` is what the ring keeps of the user's message (the text with its
        attachments' placeholders or transcript), by default the message's text.

        Raises `LeaseLost` (nothing written, the entry left pending) when
        another replica took the conversation over."""
        conversation = entry.message.conversation
        updated = append_turns(
            session,
            [Turn("user", content), Turn("assistant", answer)],
            now=self._clock.now(),
            # The request kept at most `session_max_turns` earlier turns (see
            # `_open_turn`); the stored session holds those and this exchange.
            max_turns=settings.session_max_turns + 2,
        )
        ring_entry = MemoryEntry(
            timestamp=now,
            user_message=cut_text(
                entry.message.text if said is None else said, settings.user_chars
            ),
            assistant_summary=cut_summary(answer, settings.summary_chars),
            session_name=conversation.key,
            user=updated.user,
            scope=scope_of(conversation),
        )
        exchange = Exchange(
            updated.user,
            updated,
            ring_entry,
            usage,
            settings.today(now),
            added_turns=len(updated.turns) if rewritten else 2,
            inbox_key=entry.key,
            fence=fence,
            fence_key=conversation.key,
            settlement=settlement,
        )
        try:
            await self._store.commit_exchange(exchange)
        except LeaseLost:
            if settlement is not None:  # the tokens were used all the same
                with contextlib.suppress(StoreError):
                    await self._store.ledger_settle(settlement)
            raise
        except StoreError as exc:
            log.error("exchange answered but not stored: %s", exc)
            return False
        return True


class _Sender:
    """One message's sender as a person, looked up in the store only when
    asked: the ring is read when a session starts or is refitted, and a limit
    check lets the store read the link inside its reserve, so a message that
    continues its session makes no link lookup."""

    __slots__ = ("_conversation", "_people", "_person", "fixed")

    def __init__(self, people: People, conversation: Conversation) -> None:
        self._people, self._conversation = people, conversation
        self.fixed = people.fixed(conversation)  # set: no link can change it
        self._person: Person | None = None

    async def person(self) -> Person:
        if self._person is None:
            self._person = await self._people.of(self._conversation)
        return self._person


def _text_only(prompt: Prompt) -> Prompt:
    """`prompt` without any image or document part."""
    turns = tuple(Turn(t.role, t.content) for t in prompt.messages)
    return Prompt(system=prompt.system, messages=turns, cache_key=prompt.cache_key)


async def _relay(provider: Provider, prompt: Prompt, reply: StreamingReply, meter: Meter) -> Usage:
    """The provider's text into `reply`, its reports into `meter`; the usage."""
    usage = Usage()
    async for event in provider.stream(prompt):
        if isinstance(event, TextDelta):
            await reply.push(event.text)
        else:
            meter.see(event)
            usage = usage + event.usage
    return usage


@contextlib.asynccontextmanager
async def _typing_while_silent(
    outbox: Outbox, reply: StreamingReply, interval: float
) -> AsyncIterator[None]:
    """Keep the platform's typing indicator on, every `interval` seconds,
    until the first text shows (`_stream` skips this where the platform has
    none: `typing_interval` None, the console and slash command replies)."""

    async def keep_typing() -> None:
        in_progress_phase()  # a typing indicator waits behind answers being sent
        while not reply.started:
            try:
                await outbox.typing()
            except Exception as exc:  # cosmetic: never let it end a good answer
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(interval)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
