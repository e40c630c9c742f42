"""The limits ledger on every backend: holds fit or refuse atomically, settle,
expire, count refusals and rate notices, and survive a reopen."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

from chatbridge.core.ledger import Account, Hold, Limits, Settlement, Tally
from chatbridge.core.models import Usage
from tests.stores.helpers import AnyStore, Stores, exchange, opened

DAY, MONTH = "2026-12-02", "2026-12"
NOW = 1_800_000_000.0


def _hold(hid: str, tokens: int, limits: Limits, *, now: float = NOW, nano: int = 0) -> Hold:
    account = Account("person:alice", limits)
    return Hold(hid, (account,), tokens, nano, DAY, MONTH, now, now + 300)


def _settle(hid: str, tokens_in: int, tokens_out: int, *, answered: bool = True) -> Settlement:
    return Settlement(hid, ("person:alice",), DAY, MONTH, tokens_in, tokens_out, 7, answered)


async def test_holds_fit_until_the_limit_then_refuse(store: AnyStore) -> None:
    limits = Limits(tokens_per_day=250)
    assert (await store.ledger_reserve(_hold("a", 100, limits))).ok
    assert (await store.ledger_reserve(_hold("b", 100, limits))).ok
    third = await store.ledger_reserve(_hold("c", 100, limits))
    assert not third.ok
    assert (third.account, third.kind) == ("person:alice", "tokens_per_day")
    # Settling gives back what the worst case over-reserved.
    await store.ledger_settle(_settle("a", 10, 20))
    assert (await store.ledger_reserve(_hold("c", 100, limits))).ok
    (row,) = await store.ledger_rows(since_day=DAY)
    assert row.account == "person:alice"
    assert row.tally == Tally(tokens_in=10, tokens_out=20, requests=1, refused=1, nano_usd=7)


async def test_concurrent_holds_never_pass_the_limit_together(store: AnyStore) -> None:
    limits = Limits(tokens_per_day=200)
    verdicts = await asyncio.gather(
        *(store.ledger_reserve(_hold(f"h{i}", 100, limits)) for i in range(5))
    )
    assert sum(v.ok for v in verdicts) == 2


async def test_an_unsettled_hold_expires(store: AnyStore) -> None:
    limits = Limits(tokens_per_day=100)
    assert (await store.ledger_reserve(_hold("a", 100, limits))).ok
    assert not (await store.ledger_reserve(_hold("b", 100, limits, now=NOW + 299))).ok
    assert (await store.ledger_reserve(_hold("c", 100, limits, now=NOW + 301))).ok


async def test_messages_per_minute_slides_and_notifies_once_a_minute(store: AnyStore) -> None:
    limits = Limits(messages_per_minute=2)
    assert (await store.ledger_reserve(_hold("a", 1, limits))).ok
    assert (await store.ledger_reserve(_hold("b", 1, limits, now=NOW + 1))).ok
    first = await store.ledger_reserve(_hold("c", 1, limits, now=NOW + 2))
    second = await store.ledger_reserve(_hold("d", 1, limits, now=NOW + 30))
    assert (first.ok, first.kind, first.notify) == (False, "messages_per_minute", True)
    assert (second.ok, second.notify) == (False, False)
    # A failed request does not count as answered: its stamp goes.
    await store.ledger_settle(_settle("b", 0, 0, answered=False))
    assert (await store.ledger_reserve(_hold("e", 1, limits, now=NOW + 31))).ok
    assert (await store.ledger_reserve(_hold("f", 1, limits, now=NOW + 61))).ok


async def test_usd_limits_count_nano_dollars(store: AnyStore) -> None:
    limits = Limits(usd_per_month=0.001)  # a million nano-dollars
    assert (await store.ledger_reserve(_hold("a", 1, limits, nano=600_000))).ok
    refused = await store.ledger_reserve(_hold("b", 1, limits, nano=600_000))
    assert (refused.ok, refused.kind) == (False, "usd_per_month")


async def test_snapshots_see_holds_and_settled_use(store: AnyStore) -> None:
    limits = Limits(tokens_per_day=1000)
    assert (await store.ledger_reserve(_hold("a", 100, limits))).ok
    await store.ledger_settle(_settle("a", 30, 40))
    assert (await store.ledger_reserve(_hold("b", 500, limits))).ok
    snap = (await store.ledger_snapshots(_hold("", 0, limits)))["person:alice"]
    assert snap.day.tokens == 70
    assert snap.month.tokens == 70
    assert snap.held_day[0] == 500


async def test_the_ledger_survives_a_reopen(backend: str, path: Path, store: AnyStore) -> None:
    limits = Limits(tokens_per_day=150)
    assert (await store.ledger_reserve(_hold("a", 100, limits))).ok
    await store.ledger_settle(_settle("a", 60, 40))
    await store.aclose()
    again = await opened(backend, path)
    try:
        assert not (await again.ledger_reserve(_hold("b", 100, limits))).ok
        (row,) = await again.ledger_rows(since_day=DAY)
        assert (row.tally.tokens, row.tally.refused) == (100, 1)
    finally:
        await again.aclose()


async def test_an_answer_settles_in_its_exchange_commit(store: AnyStore) -> None:
    limits = Limits(tokens_per_day=150)
    assert (await store.ledger_reserve(_hold("a", 100, limits))).ok
    assert not (await store.ledger_reserve(_hold("b", 100, limits))).ok  # "a" holds 100
    answered = replace(exchange("Hallo"), settlement=_settle("a", 20, 10))
    await store.commit_exchange(answered)
    assert (await store.ledger_reserve(_hold("c", 100, limits))).ok  # 30 used + 100 held
    rows = await store.ledger_rows(since_day=DAY)
    assert [(r.tally.tokens, r.tally.requests, r.tally.refused) for r in rows] == [(30, 1, 1)]


async def test_a_forgotten_users_answer_is_still_counted(store: AnyStore) -> None:
    await store.forget("telegram:1")
    late = replace(exchange("Hallo", started=0.0), settlement=_settle("a", 20, 10))
    await store.commit_exchange(late)
    assert await store.ring("telegram:1", since=0) == []
    (row,) = await store.ledger_rows(since_day=DAY)
    assert row.tally.tokens == 30


async def test_a_hold_with_a_sender_goes_on_its_linked_persons_account(store: AnyStore) -> None:
    """The store reads the sender's link in the reserve's own step: a hold on
    another person's account writes nothing and names the person found."""
    limits = Limits(tokens_per_day=150)

    def hold(hid: str, person: str, tokens: int = 100) -> Hold:
        account = Account(f"person:{person}", limits)
        return Hold(hid, (account,), tokens, 0, DAY, MONTH, NOW, NOW + 300, "telegram:1")

    assert (await store.ledger_reserve(hold("a", "telegram:1"))).ok  # unlinked: its own
    await store.link_join("discord:7", "telegram:1")
    stale = await store.ledger_reserve(hold("b", "telegram:1"))
    assert (stale.ok, stale.moved) == (False, "discord:7")
    assert (await store.ledger_reserve(hold("c", "discord:7"))).ok
    full = await store.ledger_reserve(hold("d", "discord:7"))
    assert (full.ok, full.moved, full.kind) == (False, None, "tokens_per_day")
    await store.link_split("telegram:1")
    back = await store.ledger_reserve(hold("e", "discord:7", tokens=1))
    assert (back.ok, back.moved) == (False, "telegram:1")
    rows = {r.account: r.tally for r in await store.ledger_rows(since_day=DAY)}
    assert rows == {"person:discord:7": Tally(refused=1)}  # "b" and "e" wrote nothing
    snaps = await store.ledger_snapshots(hold("probe", "telegram:1"))
    assert snaps["person:telegram:1"].held_day == (100, 0)  # "a" only


async def test_an_answers_count_outlives_forget_and_a_reopen(
    backend: str, path: Path, store: AnyStore
) -> None:
    """Settled with its exchange on the ring owner's own account (SQLite
    counts it in the usage row that commit writes): forget erases the usage,
    never the counted use, and a reopen still sees it."""
    limits = Limits(tokens_per_day=130)
    settled = Settlement("a", ("person:alice", "scope:telegram:-1"), DAY, MONTH, 20, 10, 7)
    await store.commit_exchange(
        replace(exchange("Hallo", user="alice", day=DAY), settlement=settled)
    )
    assert await store.usage("alice", day=DAY) == Usage(3, 5)
    counted = [
        ("person:alice", Tally(20, 10, 1, 0, 7)),
        ("scope:telegram:-1", Tally(20, 10, 1, 0, 7)),
    ]
    assert [(r.account, r.tally) for r in await store.ledger_rows(since_day=DAY)] == counted
    await store.forget("alice")
    assert await store.usage("alice", day=DAY) == Usage()
    assert [(r.account, r.tally) for r in await store.ledger_rows(since_day=DAY)] == counted
    await store.aclose()
    again = await opened(backend, path)
    try:
        assert (await again.ledger_reserve(_hold("b", 100, limits))).ok  # 30 + 100
        assert not (await again.ledger_reserve(_hold("c", 1, limits))).ok
        (alice, _) = await again.ledger_rows(since_day=DAY)
        assert (alice.tally.tokens, alice.tally.requests, alice.tally.refused) == (30, 1, 1)
    finally:
        await again.aclose()


async def test_a_sqlite_file_from_before_the_counted_usage_row_opens_and_counts(
    tmp_path: Path, stores: Stores
) -> None:
    """A file whose usage table has no counter columns (the schema up to
    2026-12-03) gets them at open, all 0; its ledger rows still count."""
    path = tmp_path / "chatbridge.db"
    await (await stores("sqlite", path)).aclose()
    db = sqlite3.connect(path, isolation_level=None)
    for column in ("ledger_tokens_in", "ledger_tokens_out", "ledger_requests", "ledger_nano_usd"):
        db.execute(f"ALTER TABLE usage DROP COLUMN {column}")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute("INSERT INTO usage VALUES ('alice', ?, 3, 5)", (DAY,))
    db.execute("INSERT INTO ledger VALUES ('person:alice', ?, 60, 40, 1, 0, 7)", (DAY,))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()

    store = await stores("sqlite", path)
    assert [(r.account, r.tally) for r in await store.ledger_rows(since_day=DAY)] == [
        ("person:alice", Tally(60, 40, 1, 0, 7))
    ]
    limits = Limits(tokens_per_day=150)
    assert not (await store.ledger_reserve(_hold("a", 51, limits))).ok  # 100 used
    assert (await store.ledger_reserve(_hold("b", 50, limits))).ok
    answered = replace(exchange("Hallo", user="alice", day=DAY), settlement=_settle("b", 20, 10))
    await store.commit_exchange(answered)
    assert await store.usage("alice", day=DAY) == Usage(6, 10)
    (row,) = await store.ledger_rows(since_day=DAY)
    assert row.tally == Tally(80, 50, 2, 1, 14)
    await store.aclose()
    again = await stores("sqlite", path)  # the migrated file passes the open's checks
    (row,) = await again.ledger_rows(since_day=DAY)
    assert row.tally == Tally(80, 50, 2, 1, 14)
    # Version 3 now (2, then the clustered layout), which a build from before
    # the counters refuses.
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "3",
        )
