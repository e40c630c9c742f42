"""The durable inbox in the engine: redelivery, resume after a crash, late
notices, drain, a failed commit and what a message costs in store writes.

Real `SqliteStore` files on tmp_path; only our own Protocols are fakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings, NotAccepting
from chatbridge.core.models import Conversation, InboxEntry, IncomingMessage
from chatbridge.core.ports import Prompt, StreamEvent, TextDelta
from chatbridge.core.texts import say
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider
from tests.support.testbot import ALICE

BOB = "42"  # a second user the test bot allows (tests/support/testbot.py)
ALLOW = (f"telegram:{ALICE}", f"telegram:{BOB}")


def _message(text: str, event_id: str, user: str = ALICE) -> IncomingMessage:
    conversation = Conversation(platform="telegram", chat=user, user=user)
    return IncomingMessage(conversation=conversation, text=text, event_id=event_id)


def _key(event_id: str) -> str:
    return f"telegram:{event_id}"


async def _open(path: Path) -> SqliteStore:
    store = SqliteStore(path, max_entries=20)
    await store.open()
    return store


def _engine(
    store: SqliteStore,
    provider: ScriptedProvider,
    clock: ManualClock,
    settings: EngineSettings | None = None,
) -> Engine:
    return Engine(
        settings or EngineSettings(language="de"),
        store=store,
        provider=provider,
        access=AccessPolicy(allow=ALLOW),
        clock=clock,
    )


def _echo() -> ScriptedProvider:
    return ScriptedProvider(lambda prompt: [f"zu {prompt.messages[-1].content}"])


POLLS = 400  # x 5 ms: two seconds at most


async def _until(condition: Callable[[], object]) -> None:
    for _ in range(POLLS):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached within 2 s")


async def _until_inbox_empty(store: SqliteStore) -> None:
    for _ in range(POLLS):
        if not await store.inbox_pending():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the inbox still holds entries after 2 s")


class Outboxes:
    """One RecordingOutbox per chat, as a platform's `outbox(message)` would give."""

    def __init__(self, **kwargs: object) -> None:
        self.by_chat: dict[str, RecordingOutbox] = {}
        self._kwargs = kwargs

    def __call__(self, message: IncomingMessage) -> RecordingOutbox:
        chat = message.conversation.chat
        if chat not in self.by_chat:
            self.by_chat[chat] = RecordingOutbox(**self._kwargs)  # type: ignore[arg-type]
        return self.by_chat[chat]


async def test_a_redelivered_event_is_answered_once_also_after_a_restart(
    tmp_path: Path, closing: Closing
) -> None:
    clock, provider = ManualClock(), _echo()
    store = closing(await _open(tmp_path / "bot.db"))
    engine = _engine(store, provider, clock)
    outboxes = Outboxes()
    engine.attach("telegram", outboxes)

    assert await engine.accept(_message("Hallo", "1001")) is True
    assert await engine.accept(_message("Hallo", "1001")) is False  # still pending
    await _until_inbox_empty(store)
    await _until(lambda: outboxes.by_chat.get(ALICE) and outboxes.by_chat[ALICE].messages)
    assert await engine.accept(_message("Hallo", "1001")) is False  # already answered
    await store.aclose()

    store = closing(await _open(tmp_path / "bot.db"))  # the platform redelivers after a restart
    engine = _engine(store, provider, clock)
    engine.attach("telegram", outboxes)
    assert await engine.accept(_message("Hallo", "1001")) is False
    assert await engine.resume() == 0
    await asyncio.sleep(0.02)
    assert len(provider.prompts) == 1
    assert outboxes.by_chat[ALICE].texts == ["zu Hallo"]
    assert [e.user_message for e in await store.ring(f"telegram:{ALICE}", since=0.0)] == ["Hallo"]


async def test_resume_answers_what_a_crash_left_oldest_first_per_conversation(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    crashed = await _open(tmp_path / "bot.db")
    now = clock.now()
    # Written by the process that crashed, deliberately not in arrival order.
    for text, event, user, age in (
        ("zweite", "2", ALICE, 50),
        ("Bob eins", "3", BOB, 55),
        ("erste", "1", ALICE, 60),
        ("dritte", "4", ALICE, 40),
    ):
        entry = InboxEntry(_key(event), _message(text, event, user), received_at=now - age)
        assert await crashed.inbox_add(entry)
    crashed._db.close()  # type: ignore[union-attr]  # killed: no clean close
    crashed._db = None

    store = closing(await _open(tmp_path / "bot.db"))
    provider = _echo()
    engine = _engine(store, provider, clock)
    outboxes = Outboxes()
    engine.attach("telegram", outboxes)
    assert await engine.resume() == 4
    await _until_inbox_empty(store)
    await _until(lambda: len(outboxes.by_chat.get(ALICE, RecordingOutbox()).messages) == 3)

    assert outboxes.by_chat[ALICE].texts == ["zu erste", "zu zweite", "zu dritte"]
    assert outboxes.by_chat[BOB].texts == ["zu Bob eins"]
    alice = {"erste", "zweite", "dritte"}
    alice_prompts = [p for p in provider.prompts if p.messages[-1].content in alice]
    assert [p.messages[-1].content for p in alice_prompts] == ["erste", "zweite", "dritte"]
    assert len(alice_prompts[-1].messages) == 5, "each saw the answers before it"
    ring = await store.ring(f"telegram:{ALICE}", since=0.0)
    assert [e.user_message for e in ring] == ["erste", "zweite", "dritte"]
    assert await engine.resume() == 0  # nothing is left to answer


async def test_resume_does_not_touch_platforms_that_are_not_attached(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    store = closing(await _open(tmp_path / "bot.db"))
    entry = InboxEntry(_key("9"), _message("Hallo", "9"), received_at=clock.now())
    assert await store.inbox_add(entry)
    provider = _echo()
    engine = _engine(store, provider, clock)
    assert await engine.resume() == 0
    await asyncio.sleep(0.02)
    assert provider.prompts == []
    assert [e.key for e in await store.inbox_pending()] == [_key("9")]


async def test_a_recorded_answer_is_finished_by_editing_the_posted_message(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    store = closing(await _open(tmp_path / "bot.db"))
    outboxes = Outboxes()
    chat = outboxes(_message("", "0"))
    ref = chat.seed("Die Sendung 1Z999")  # posted by the process that crashed
    entry = InboxEntry(_key("5"), _message("Paket?", "5"), received_at=clock.now() - 30)
    assert await store.inbox_add(entry)
    await store.inbox_progress(entry.key, sent=(ref,), answer="Die Sendung 1Z999 kommt Mittwoch.")

    provider = _echo()
    engine = _engine(store, provider, clock)
    engine.attach("telegram", outboxes)
    assert await engine.resume() == 1
    await _until_inbox_empty(store)

    assert chat.calls == [("edit", ref, "Die Sendung 1Z999 kommt Mittwoch.")]
    assert chat.texts == ["Die Sendung 1Z999 kommt Mittwoch."]
    assert provider.prompts == [], "a recorded answer is not generated again"
    (remembered,) = await store.ring(f"telegram:{ALICE}", since=0.0)
    assert remembered.user_message == "Paket?"
    assert remembered.assistant_summary.startswith("Die Sendung 1Z999 kommt Mittwoch")


async def test_an_entry_older_than_redeliver_within_gets_the_late_notice(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    settings = EngineSettings(language="de", redeliver_within=15 * 60)
    store = closing(await _open(tmp_path / "bot.db"))
    old = InboxEntry(_key("6"), _message("Wo ist   das Paket?", "6"), clock.now() - 15 * 60 - 1)
    fresh = InboxEntry(_key("7"), _message("Und jetzt?", "7"), clock.now() - 15 * 60 + 1)
    assert await store.inbox_add(old)
    assert await store.inbox_add(fresh)

    provider = _echo()
    engine = _engine(store, provider, clock, settings)
    outboxes = Outboxes()
    engine.attach("telegram", outboxes)
    assert await engine.resume() == 2
    await _until_inbox_empty(store)

    notice = say("de", "late", preview="Wo ist das Paket?")
    assert outboxes.by_chat[ALICE].texts == [notice, "zu Und jetzt?"]
    assert [p.messages[-1].content for p in provider.prompts] == ["Und jetzt?"]
    ring = await store.ring(f"telegram:{ALICE}", since=0.0)
    assert [e.user_message for e in ring] == ["Und jetzt?"]


class HangingProvider(ScriptedProvider):
    """Streams a first piece of text, then never finishes."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.prompts.append(prompt)
        try:
            yield TextDelta("Das Paket ")
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def test_drain_cuts_a_reply_past_the_grace_and_the_restart_finishes_it(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    store = closing(await _open(tmp_path / "bot.db"))
    provider = HangingProvider()
    engine = _engine(store, provider, clock)
    outbox = RecordingOutbox(edit_interval=0.01)
    pending = asyncio.create_task(engine.handle(_message("Paket?", "8"), outbox))
    await _until(lambda: outbox.messages)  # the partial answer is on screen
    await engine.drain(0.05)
    await asyncio.wait_for(pending, 1.0)

    assert provider.cancelled == 1
    cut = say("de", "cut_by_restart")
    assert outbox.last.startswith("Das Paket")
    assert outbox.last.endswith(cut)
    assert len(outbox.messages) == 1
    (left,) = await store.inbox_pending()
    assert left.key == _key("8")
    assert left.sent == ("1",)
    assert left.answer is None
    assert await store.ring(f"telegram:{ALICE}", since=0.0) == []
    with pytest.raises(NotAccepting):
        await engine.accept(_message("noch was", "9"))
    await store.aclose()

    # After the restart the cut answer is completed in the same message.
    store = closing(await _open(tmp_path / "bot.db"))
    engine = _engine(store, ScriptedProvider("Das Paket kommt am Mittwoch."), clock)
    engine.attach("telegram", lambda message: outbox)
    before = len(outbox.calls)
    assert await engine.resume() == 1
    await _until_inbox_empty(store)
    after = outbox.calls[before:]
    assert after
    assert all(kind == "edit" and ref == "1" for kind, ref, _ in after), after
    assert outbox.texts == ["Das Paket kommt am Mittwoch."]
    ring = await store.ring(f"telegram:{ALICE}", since=0.0)
    assert [e.user_message for e in ring] == ["Paket?"]


async def test_a_failed_commit_tells_the_user_and_stores_no_ring_entry(
    tmp_path: Path, closing: Closing
) -> None:
    path = tmp_path / "bot.db"
    store = closing(await _open(path))
    # Another connection makes the ring refuse writes (as a full disk would):
    # the inbox still works, only the commit's transaction fails.
    other = sqlite3.connect(path, isolation_level=None)
    other.execute(
        "CREATE TRIGGER ring_full BEFORE INSERT ON ring "
        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    other.close()
    provider = _echo()
    engine = _engine(store, provider, ManualClock())
    outbox = RecordingOutbox()
    await engine.handle(_message("Paket?", "10"), outbox)

    assert outbox.texts == ["zu Paket?", say("de", "not_stored")]
    assert await store.ring(f"telegram:{ALICE}", since=0.0) == []
    key = f"telegram:{ALICE}::{ALICE}"
    assert await store.load_session(key) is None, "the commit was all or nothing"
    assert await store.inbox_pending() == [], "the entry is not answered again"


WRITE_KINDS = ("inbox_add", "inbox_progress", "inbox_done", "commit", "other", "inbox_prune")


def _writes(**counts: int) -> dict[str, int]:
    """A tally as `_count_writes` keeps it: `counts`, every other kind 0."""
    assert set(counts) <= set(WRITE_KINDS), counts
    return dict.fromkeys(WRITE_KINDS, 0) | counts


def _count_writes(store: SqliteStore) -> dict[str, int]:
    """Write transactions SQLite runs, read off the store's own connection:
    a BEGIN IMMEDIATE ... COMMIT block, or one autocommit write statement."""
    counts = _writes()
    in_txn = [False]

    def trace(sql: str) -> None:
        statement = " ".join(sql.split()).upper()
        if statement.startswith("BEGIN"):
            in_txn[0] = True
            counts["commit"] += 1
        elif statement.startswith(("COMMIT", "ROLLBACK")):
            in_txn[0] = False
        elif in_txn[0] or not statement.startswith(("INSERT", "UPDATE", "DELETE")):
            return
        elif statement.startswith("INSERT INTO INBOX"):
            counts["inbox_add"] += 1
        elif statement.startswith("DELETE FROM INBOX WHERE DONE_AT"):
            counts["inbox_prune"] += 1  # old done markers, once every PRUNE_EVERY adds
        elif statement.startswith("UPDATE INBOX SET SENT"):
            counts["inbox_progress"] += 1
        elif statement.startswith("UPDATE INBOX SET MESSAGE = NULL"):
            counts["inbox_done"] += 1
        else:
            counts["other"] += 1

    store._db.set_trace_callback(trace)  # type: ignore[union-attr]
    return counts


async def test_store_writes_per_message_are_add_progress_and_one_commit(
    tmp_path: Path, closing: Closing
) -> None:
    store = closing(await _open(tmp_path / "bot.db"))
    engine = _engine(store, _echo(), ManualClock())
    await engine.handle(_message("warm-up", "0"), RecordingOutbox())  # its add prunes
    counts = _count_writes(store)

    # An answer that fits one message: the add, the posted message's ref, the
    # recorded answer (README "Seen means stored"), then the one commit.
    await engine.handle(_message("Paket?", "11"), RecordingOutbox())
    assert counts == _writes(inbox_add=1, inbox_progress=2, commit=1)

    # Streamed with progress edits, the same: the first post is recorded once.
    counts.update(dict.fromkeys(counts, 0))
    slow = ScriptedProvider(lambda p: ["Das ", "Paket ", "kommt."], chunk_delay=0.02)
    engine = _engine(store, slow, ManualClock())
    outbox = RecordingOutbox(edit_interval=0.01)
    await engine.handle(_message("Und?", "12"), outbox)
    assert len(outbox.messages) == 1
    assert outbox.messages[0].edits, "progress was streamed"
    assert counts == _writes(inbox_add=1, inbox_progress=2, commit=1)

    # Where no message outlives the process (the console), no reference is
    # recorded: the add, the recorded answer and the commit.
    counts.update(dict.fromkeys(counts, 0))
    await engine.handle(_message("Wo?", "14"), RecordingOutbox(edits_after_restart=False))
    assert counts == _writes(inbox_add=1, inbox_progress=1, commit=1)

    # A command: the add and marking it done.
    counts.update(dict.fromkeys(counts, 0))
    await engine.handle(_message("/help", "13"), RecordingOutbox())
    assert counts == _writes(inbox_add=1, inbox_done=1)


async def test_a_platform_without_a_typing_indicator_is_never_asked_for_one(
    tmp_path: Path,
) -> None:
    """`typing_interval` None says the platform has no indicator (the
    console); one with an interval is asked while the answer is on its way."""
    store = await _open(tmp_path / "bot.db")
    try:
        slow = ScriptedProvider(lambda p: ["Das ", "Paket."], chunk_delay=0.02)
        engine = _engine(store, slow, ManualClock())
        without, with_one = RecordingOutbox(), RecordingOutbox(typing_interval=0.01)
        await engine.handle(_message("Wo?", "21"), without)
        await engine.handle(_message("Und?", "22"), with_one)
        assert without.typing_calls == 0
        assert with_one.typing_calls >= 1
        assert without.texts == ["Das Paket."]
    finally:
        await store.aclose()


def _console_lines(*texts: str) -> list[IncomingMessage]:
    """Lines as the console hands them over: no event ID, one conversation."""
    conversation = Conversation(platform="telegram", chat=ALICE, user=ALICE)
    return [IncomingMessage(conversation=conversation, text=text) for text in texts]


async def test_handle_all_stores_the_lines_in_one_write_then_answers_each_in_turn(
    tmp_path: Path, closing: Closing
) -> None:
    store = closing(await _open(tmp_path / "bot.db"))
    provider = _echo()
    engine = _engine(store, provider, ManualClock())
    await engine.handle(_message("warm-up", "0"), RecordingOutbox())  # its add prunes
    counts = _count_writes(store)
    outbox = RecordingOutbox(edits_after_restart=False)
    lines = _console_lines("eins", "zwei", "drei")

    await engine.handle_all(lines, outbox, going=lambda: True)

    # One transaction adds the three rows (three statements inside it, so the
    # tally sees one BEGIN); then per line the recorded answer and its commit.
    assert counts == _writes(inbox_progress=3, commit=1 + 3)
    assert outbox.texts == ["zu eins", "zu zwei", "zu drei"]
    # Each was asked after the one before was remembered: the session grows.
    assert [len(p.messages) for p in provider.prompts[1:]] == [3, 5, 7]
    assert await store.inbox_pending() == []


async def test_handle_all_times_each_line_from_its_turn_not_from_the_read(
    tmp_path: Path, closing: Closing
) -> None:
    """As with `handle`, `redeliver_within` counts from when a line's turn
    comes: a long answer before it does not make it too old to answer."""
    clock = ManualClock()
    settings = EngineSettings(language="de", redeliver_within=15 * 60)
    store = closing(await _open(tmp_path / "bot.db"))

    def slow_echo(prompt: Prompt) -> list[str]:
        clock.advance(10 * 60)  # each answer takes ten minutes
        return [f"zu {prompt.messages[-1].content}"]

    engine = _engine(store, ScriptedProvider(slow_echo), clock, settings)
    outbox = RecordingOutbox()
    await engine.handle_all(_console_lines("eins", "zwei", "drei"), outbox, going=lambda: True)
    assert outbox.texts == ["zu eins", "zu zwei", "zu drei"]


async def test_handle_all_closes_the_lines_left_once_the_reader_is_gone(
    tmp_path: Path, closing: Closing
) -> None:
    store = closing(await _open(tmp_path / "bot.db"))
    provider = _echo()
    engine = _engine(store, provider, ManualClock())
    outbox = RecordingOutbox()
    await engine.handle_all(
        _console_lines("eins", "zwei", "drei"), outbox, going=lambda: not outbox.texts
    )
    assert outbox.texts == ["zu eins"]
    assert len(provider.prompts) == 1
    assert await store.inbox_pending() == [], "nothing is left for a later start to answer"


async def test_handle_all_has_each_line_stored_when_its_answer_is_asked_even_after_a_forget(
    tmp_path: Path, closing: Closing
) -> None:
    """README: a line is in the store before the model is asked about it. A
    /forget erases what is waiting in the inbox, so the lines read after it
    are written after it has run (a command goes last in its write); written
    with it, "zwei" was erased by the forget before it was asked about, and
    a kill then would have lost it."""
    path = tmp_path / "bot.db"
    store = closing(await _open(path))
    stored_when_asked: dict[str, bool] = {}

    def echo_checking_the_file(prompt: Prompt) -> list[str]:
        text = str(prompt.messages[-1].content)
        with contextlib.closing(sqlite3.connect(path)) as db:
            pending = db.execute(
                "SELECT count(*) FROM inbox WHERE done_at IS NULL AND message LIKE ?",
                (f"%{text}%",),
            ).fetchone()
        stored_when_asked[text] = pending == (1,)
        return [f"zu {text}"]

    engine = _engine(store, ScriptedProvider(echo_checking_the_file), ManualClock())
    outbox = RecordingOutbox(edits_after_restart=False)
    await engine.handle_all(
        _console_lines("eins", "/forget", "zwei", "drei"), outbox, going=lambda: True
    )
    assert stored_when_asked == {"eins": True, "zwei": True, "drei": True}
    assert outbox.texts[-2:] == ["zu zwei", "zu drei"]
    assert await store.inbox_pending() == []
