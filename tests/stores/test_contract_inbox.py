"""The inbox part of the `Store` contract (`base.Inbox`), run against every backend."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from chatbridge.core.models import ChatKind
from chatbridge.core.ports.store import DEDUPE_WINDOW
from tests.stores.helpers import (
    AnyStore,
    Stores,
    exchange,
    inbox_entry,
    opened,
    raw_bytes,
    redis_keys,
    redis_prefix,
)

SECRET = "YAK-4b9e-Lieferadresse-Hauptstraße-3 — 包裹"
USER = "55501"  # the chat, user name and reply address all carry it


def _everything(backend: str, path: Path) -> str:
    """What the store holds, raw: every file's bytes, or every redis key and value."""
    if backend == "redis":
        return repr(redis_keys(redis_prefix(path)))
    return raw_bytes(path.parent).decode("utf-8", errors="replace")


async def test_an_added_entry_is_pending_with_every_field(store: AnyStore) -> None:
    group = inbox_entry("telegram:1", 'Grüße — 你好\n"quoted"', at=5.5, kind=ChatKind.GROUP)
    private = inbox_entry("slack:E2", "x", at=6.25, answer="so far", sent=("m1", "m2"))
    assert await store.inbox_add(group) is True
    assert await store.inbox_add(private) is True

    pending = await store.inbox_pending()
    assert pending == [group, private]
    assert pending[0].message.conversation.kind is ChatKind.GROUP
    assert pending[0].message.reply_address == "-100/1"
    assert pending[0].message.conversation.thread == "7"
    assert pending[1].sent == ("m1", "m2")


async def test_an_empty_inbox_has_nothing_pending(store: AnyStore) -> None:
    assert await store.inbox_pending() == []


async def test_a_pending_key_is_refused_and_nothing_is_written(store: AnyStore) -> None:
    first = inbox_entry("telegram:1", "first")
    assert await store.inbox_add(first) is True
    assert await store.inbox_add(inbox_entry("telegram:1", "second", at=2000.0)) is False
    assert await store.inbox_pending() == [first]


async def test_add_many_adds_each_in_order_and_refuses_what_add_would(store: AnyStore) -> None:
    first = inbox_entry("telegram:1", "first")
    assert await store.inbox_add(first) is True
    second, third = inbox_entry("telegram:2", "second"), inbox_entry("telegram:3", "third")
    again = inbox_entry("telegram:1", "again", at=2000.0)
    added = await store.inbox_add_many([second, again, third, replace(second, received_at=3.0)])
    assert added == [True, False, True, False]
    assert await store.inbox_pending() == [first, second, third]
    assert await store.inbox_add_many([]) == []


async def test_add_many_with_a_malformed_entry_stores_none_but_on_redis(
    backend: str, store: AnyStore
) -> None:
    """One transaction (SQLite) or one file write (JSON): all or nothing;
    Redis adds one by one and keeps those before the bad one."""
    good = inbox_entry("telegram:1")
    handle: Any = object()
    bad = replace(good, key="telegram:2", message=replace(good.message, reply_address=handle))
    with pytest.raises(TypeError, match="reply_address must be a str"):
        await store.inbox_add_many([good, bad, inbox_entry("telegram:3")])
    assert await store.inbox_pending() == ([good] if backend == "redis" else [])


async def test_a_key_done_within_the_window_is_refused(store: AnyStore) -> None:
    now = time.time()
    await store.inbox_add(inbox_entry("telegram:1", at=now))
    await store.inbox_done("telegram:1")
    assert await store.inbox_add(inbox_entry("telegram:1", at=now + 10)) is False
    assert await store.inbox_add(inbox_entry("telegram:1", at=now + DEDUPE_WINDOW - 60)) is False
    assert await store.inbox_pending() == []


async def test_a_key_done_longer_ago_than_the_window_is_taken_again(store: AnyStore) -> None:
    now = time.time()
    await store.inbox_add(inbox_entry("telegram:1", "old", at=now))
    await store.inbox_done("telegram:1")
    again = inbox_entry("telegram:1", "redelivered much later", at=now + DEDUPE_WINDOW + 60)
    assert await store.inbox_add(again) is True
    assert await store.inbox_pending() == [again]
    assert await store.inbox_add(again) is False  # and it is pending again
    # A revived key is a new entry: it sorts after an equal-time one added before it.
    tie = inbox_entry("telegram:3", at=now)
    await store.inbox_add(tie)
    await store.inbox_done("telegram:3")
    first = inbox_entry("telegram:4", at=again.received_at)
    await store.inbox_add(first)
    revived = replace(tie, received_at=again.received_at)
    assert await store.inbox_add(revived) is True
    assert await store.inbox_pending() == [again, first, revived]


async def test_progress_records_sent_and_answer(store: AnyStore) -> None:
    entry = inbox_entry("telegram:1")
    await store.inbox_add(entry)
    await store.inbox_add(inbox_entry("telegram:2", at=1001.0))
    await store.inbox_progress("telegram:1", sent=("m1",))
    assert (await store.inbox_pending())[0] == replace(entry, sent=("m1",))
    await store.inbox_progress("telegram:1", sent=("m1", "m2"), answer="Die Antwort")
    await store.inbox_progress("telegram:1", sent=("m1", "m2", "m3"))  # None keeps the answer
    first, second = await store.inbox_pending()
    assert first == replace(entry, sent=("m1", "m2", "m3"), answer="Die Antwort")
    assert second == inbox_entry("telegram:2", at=1001.0)  # untouched
    await store.inbox_progress("telegram:1", sent=(), answer="")  # "" is an answer, not None
    assert (await store.inbox_pending())[0] == replace(entry, sent=(), answer="")


async def test_progress_ignores_unknown_and_done_keys(store: AnyStore) -> None:
    await store.inbox_progress("telegram:404", sent=("m1",), answer="a")
    assert await store.inbox_pending() == []
    assert await store.inbox_add(inbox_entry("telegram:404")) is True  # it left no marker

    await store.inbox_add(inbox_entry("telegram:1", at=time.time()))
    await store.inbox_done("telegram:1")
    await store.inbox_progress("telegram:1", sent=("m1",), answer="late")
    assert [e.key for e in await store.inbox_pending()] == ["telegram:404"]


async def test_a_value_of_the_wrong_type_is_refused_before_anything_changes(
    store: AnyStore,
) -> None:
    """An outbox's message handle must become its platform's ID (a str) first."""
    entry = inbox_entry("telegram:1")
    await store.inbox_add(entry)
    handle: Any = object()
    with pytest.raises(TypeError, match="sent refs must be str"):
        await store.inbox_progress("telegram:1", sent=(handle,))
    with pytest.raises(TypeError, match="answer must be a str"):
        await store.inbox_progress("telegram:1", sent=(), answer=handle)
    bad = replace(entry, key="telegram:2", message=replace(entry.message, reply_address=handle))
    with pytest.raises(TypeError, match="reply_address must be a str"):
        await store.inbox_add(bad)
    assert await store.inbox_pending() == [entry]
    await store.inbox_progress("telegram:1", sent=("m1",))  # the store still works
    assert await store.inbox_pending() == [replace(entry, sent=("m1",))]
    assert await store.inbox_add(inbox_entry("telegram:2")) is True


async def test_done_unknown_or_twice_is_a_no_op(store: AnyStore) -> None:
    await store.inbox_done("telegram:404")
    assert await store.inbox_add(inbox_entry("telegram:404")) is True  # no marker was made
    await store.inbox_add(inbox_entry("telegram:1", at=time.time()))
    await store.inbox_done("telegram:1")
    await store.inbox_done("telegram:1")
    assert [e.key for e in await store.inbox_pending()] == ["telegram:404"]


async def test_done_erases_text_name_and_address(backend: str, path: Path, stores: Stores) -> None:
    store = await stores(backend, path)
    long_text = f"{SECRET} " * 300  # SQLite: spills into overflow pages
    for key, text in (("telegram:9001", SECRET), ("telegram:9002", long_text)):
        await store.inbox_add(inbox_entry(key, text, at=time.time(), user=USER, answer=SECRET))
    await store.inbox_progress("telegram:9001", sent=(f"sent-{USER}",))
    assert SECRET in _everything(backend, path)  # the check can fail: it is stored
    await store.inbox_done("telegram:9001")
    await store.inbox_done("telegram:9002")
    assert await store.inbox_pending() == []
    await store.aclose()

    everything = _everything(backend, path)
    assert SECRET not in everything
    assert "YAK" not in everything
    assert USER not in everything  # nor who sent it, nor where the answer went
    assert "telegram:9001" in everything  # the marker: the key (and a time) only


async def test_commit_exchange_marks_its_entry_done(store: AnyStore) -> None:
    await store.inbox_add(inbox_entry("telegram:1", at=time.time()))
    await store.inbox_add(inbox_entry("telegram:2", at=time.time()))
    ex = replace(exchange("the question"), inbox_key="telegram:1")
    await store.commit_exchange(ex)

    assert [e.key for e in await store.inbox_pending()] == ["telegram:2"]
    assert await store.ring("telegram:1", since=0) == [ex.entry]
    assert await store.inbox_add(inbox_entry("telegram:1", at=time.time())) is False
    await store.commit_exchange(exchange("no inbox entry"))  # inbox_key "" touches nothing
    assert [e.key for e in await store.inbox_pending()] == ["telegram:2"]


async def test_commit_of_a_forgotten_user_still_marks_done(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path)
    await store.inbox_add(inbox_entry("telegram:9001", SECRET, at=time.time(), user=USER))
    await store.forget("telegram:1")
    late = replace(exchange(SECRET, started=1000.0), inbox_key="telegram:9001")
    await store.commit_exchange(late)  # in flight during the forget: writes nothing...

    assert await store.ring("telegram:1", since=-1) == []
    assert await store.inbox_pending() == []  # ...except that the entry is done
    assert await store.inbox_add(inbox_entry("telegram:9001", at=time.time())) is False
    await store.aclose()
    assert SECRET not in _everything(backend, path)


async def test_forget_erases_done_entries_and_keeps_only_what_arrives_after_it(
    backend: str, path: Path, stores: Stores
) -> None:
    """A done entry holds nothing after a forget; an entry received after the
    forget (1 s later here) stays pending with its text. Entries pending at the
    forget are dropped: tests/stores/test_forget_inbox.py."""
    store = await stores(backend, path)
    now = time.time()
    await store.inbox_add(inbox_entry("telegram:9001", SECRET, at=now, user="1"))
    await store.commit_exchange(replace(exchange(SECRET), inbox_key="telegram:9001"))
    waiting = inbox_entry("telegram:9002", "still to answer", at=now + 1, user="1")
    await store.inbox_add(waiting)
    await store.forget("telegram:1")

    assert await store.ring("telegram:1", since=-1) == []
    assert await store.inbox_pending() == [waiting]
    if backend == "sqlite":  # forget scrubbed the WAL: nothing is left even while open
        assert SECRET not in _everything(backend, path)
    await store.aclose()
    assert SECRET not in _everything(backend, path)
    assert "still to answer" in _everything(backend, path)


async def test_pending_is_oldest_first_ties_in_insertion_order(store: AnyStore) -> None:
    order = [("telegram:c", 3.0), ("telegram:a", 1.0), ("telegram:t2", 5.0)]
    order += [("telegram:t1", 5.0), ("telegram:b", 2.0), ("telegram:t0", 5.0)]
    for key, at in order:
        await store.inbox_add(inbox_entry(key, at=at))
    keys = [e.key.removeprefix("telegram:") for e in await store.inbox_pending()]
    assert keys == ["a", "b", "c", "t2", "t1", "t0"]


async def test_pending_entries_and_markers_survive_a_new_instance(
    backend: str, path: Path, stores: Stores
) -> None:
    first = await stores(backend, path)
    now = time.time()
    entries = [inbox_entry(f"telegram:{i}", f"text {i}", at=now + i) for i in range(3)]
    for entry in entries:
        await first.inbox_add(entry)
    await first.inbox_progress("telegram:1", sent=("m1",), answer="fertig")
    await first.inbox_done("telegram:2")
    await first.aclose()

    second = await opened(backend, path)
    try:
        assert await second.inbox_pending() == [
            entries[0], replace(entries[1], sent=("m1",), answer="fertig"),
        ]  # fmt: skip
        assert await second.inbox_add(entries[2]) is False  # the done marker survived
    finally:
        await second.aclose()


async def test_concurrent_adds_of_one_key_take_it_once(backend: str, path: Path) -> None:
    """Two instances (connections, clients) race for 100 keys; json serves one process."""
    keys = [f"telegram:{i}" for i in range(100)]
    if backend == "sqlite":
        await (await opened(backend, path)).aclose()  # the file exists before the race
        wins = _race_in_threads(path, keys)
    else:
        a = await opened(backend, path)
        b = a if backend == "json" else await opened(backend, path)
        try:
            results = await asyncio.gather(
                *(s.inbox_add(inbox_entry(k)) for k in keys for s in (a, b))
            )
            wins = [results[::2], results[1::2]]
        finally:
            await a.aclose()
            await b.aclose()
    assert [x + y for x, y in zip(*wins, strict=True)] == [1] * len(keys)
    check = await opened(backend, path)
    try:
        assert sorted(e.key for e in await check.inbox_pending()) == sorted(keys)
    finally:
        await check.aclose()


def _race_in_threads(path: Path, keys: list[str]) -> list[list[bool]]:
    """Each thread opens its own SqliteStore (own connection), then both add every key."""
    barrier = threading.Barrier(2)
    wins: list[list[bool]] = [[], []]
    errors: list[BaseException] = []

    async def run(i: int) -> None:
        store = await opened("sqlite", path)
        try:
            barrier.wait(timeout=10)
            for key in keys:
                wins[i].append(await store.inbox_add(inbox_entry(key)))
                await asyncio.sleep(0)
        finally:
            await store.aclose()

    def thread(i: int) -> None:
        try:
            asyncio.run(run(i))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    return wins


async def test_attachments_are_kept_as_references_and_dropped_by_done(
    backend: str, path: Path, stores: Stores
) -> None:
    from chatbridge.core.models import Attachment, AttachmentKind

    store = await stores(backend, path)
    voice = Attachment(AttachmentKind.VOICE, "audio/ogg", 3000, "voice.ogg", f"AwAC-{SECRET}")
    entry = inbox_entry("telegram:9", "", at=time.time())
    entry = replace(entry, message=replace(entry.message, attachments=(voice,)))
    assert await store.inbox_add(entry) is True
    assert await store.inbox_pending() == [entry]
    assert SECRET in _everything(backend, path)  # the check can fail: it is stored
    await store.inbox_done(entry.key)
    assert await store.inbox_pending() == []
    await store.aclose()
    assert SECRET not in _everything(backend, path), "a done entry keeps no file reference"
