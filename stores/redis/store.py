"""The Redis store: lets several bot processes share sessions, rings, usage and the inbox.

Data layout (``P`` is the constructor's `prefix`, "chatbridge:" by default).
Every key is ``P`` + a fixed tag + exactly one variable part, so user IDs and
session keys may contain ':' (``telegram:579304651``,
``telegram:579304651::579304651``) without two keys ever colliding::

    P ring:{user}            LIST   the memory ring, JSON entries oldest first
                                    (RPUSH, then LTRIM -max_entries -1)
    P session:{key}          HASH   user, started_at, last_active of a session
    P turns:{key}            LIST   its turns as JSON {"role", "content"}, oldest
                                    first (RPUSH the new ones, LTRIM to the
                                    newest len(session.turns))
    P user-sessions:{user}   SET    keys of the sessions `user` owns, so `forget`
                                    finds them (may hold stale keys; see below)
    P usage:{day}:{user}     HASH   input_tokens, output_tokens (HINCRBY); ':'
                                    and '%' in `day` are %-escaped, so the
                                    first ':' after the day ends it
    P user-days:{user}       SET    the days that have a usage key for `user`
    P forgotten:{sha256}     STRING the wall-clock time (repr of a float) of the
                                    last `forget` of the user whose ID has this
                                    SHA-256 hex digest; see Forget below
    P inbox:{key}            HASH   a pending inbox entry: received_at, seq,
                                    message (JSON, `_codec.message_to_json`),
                                    sent (JSON array), answer (absent: None)
    P inbox-pending          ZSET   the pending keys, scored by received_at
                                    (ties: by the entries' seq)
    P inbox-done:{key}       STRING the wall-clock time an entry was done; it
                                    holds nothing else and expires after
                                    `DEDUPE_WINDOW`, which is what refuses
                                    a redelivery meanwhile
    P inbox-seq              STRING the counter that numbers entries (seq)
    P lease:{conversation}   STRING the replica holding the conversation's turn
    P fence:{conversation}   STRING its fencing counter (`_lease`)
    P cursor-ids:{platform}  HASH   channel -> newest handled message ID, and
    P cursor-times:{platform} ZSET  channel by the time of its last traffic
                                    (`_cursors`; both expire after `ttl`)

Expiry: Redis is shared infrastructure, so nothing lives forever. Every write
refreshes the expiry of the keys it touches: rings, sessions, turns and
user-sessions get `ttl` (7 days by default), usage keys 8 days (only today's
count is ever read), user-days the longer of the two so it outlives every key
it lists. A user who stays away longer than that is gone without `forget`.
Tombstones (forgotten:) live as long as user-days and are never refreshed.
Inbox entries, inbox-pending and inbox-seq get `ttl` when an entry is added
(not refreshed by progress), so an entry nobody finished disappears with its
conversation; done markers live `DEDUPE_WINDOW`.

Atomicity: `commit_exchange`, `save_session` and `forget` are one MULTI/EXEC
transaction each, so other clients see all of a write or none of it. Redis
does not roll a transaction back when one of its commands fails (e.g. RPUSH
onto somebody's string), so a write first reads the TYPE of every key it will
touch (and that the usage counters are integers) in one round trip, and runs
MULTI/EXEC only if all are absent or as above; otherwise it raises
`StoreCorrupt` naming the key and writes nothing. The inbox calls that read
before they write (add, progress, done) are each one Lua script instead, which
does the same checks first (`_inbox`). Writes do not WATCH: our own
clients only ever create the types above, and optimistic locking starves
under concurrent commits for one user (every EXEC but one aborts). The one
exception is a commit with a fence (`Exchange.fence`, from a lease): it
WATCHes the conversation's fence counter, which changes only when another
replica takes the lease over, and raises `LeaseLost` (nothing written) if the
counter is above its fence or changes before EXEC. Only a
foreign client changing a key's type in the sub-millisecond gap between check
and EXEC could still make part of a transaction fail. `forget` does WATCH the
sets it reads (see below) and retries if they change.

Ownership: a session key can change owner (`save_session` with another
`user`), and `save_session(None)` does not read the owner, so user-sessions
may list keys the user no longer owns. `forget` reads each listed session's
owner under WATCH and erases only the user's own; stale entries disappear with
the set.

Forget: `forget` DELetes every key above for the user and, in the same
transaction, SETs the tombstone. `commit_exchange` GETs the tombstone in its
type-check round trip and writes nothing if it is at or after the session's
`started_at` (a reply that was in flight during the forget). A forget landing
in the gap between that check and the commit's EXEC is caught by a second GET
inside the MULTI: the commit then erases the user again (keeping the
tombstone), so forget wins even there, at the price of anything the user
committed since the forget. Times are wall clocks of the clients, so bot
hosts sharing a server need synchronised clocks.

Privacy: `forget` DELetes every key above for the user, and the tombstone
names the user only by hash; the user's pending inbox entries are then marked
done (their hash DELeted), so a done entry is only its key and a time. Whether the text then
lingers in an RDB snapshot or AOF file until the next rewrite is the server's
persistence configuration, not ours.

Damaged data: a key of another type than above is not ours and refused
(`StoreCorrupt`, nothing written). A value inside one of our keys that cannot
be read (bytes that are not UTF-8 — the client decodes with
`surrogateescape` — malformed JSON, a field that is not a number) costs that
value: the ring loads without the entry, the session without the turn (or
as none, when its own hash is damaged), the inbox without the entry, each
reported once by key and position, never by content.

Errors: a server that cannot be reached raises `StoreError` naming the URL;
a password in the URL (``redis://user:pw@host`` or ``?password=``) is shown as
``***`` in every message.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import replace

from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError
from redis.typing import EncodableT, FieldT

from chatbridge.core.ledger import Hold, LedgerRow, Settlement, Snapshot, Verdict
from chatbridge.core.models import (
    ChannelCursor,
    Conversation,
    Exchange,
    InboxEntry,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.core.ports.store import LeaseLost, Replication
from chatbridge.stores._base import StoreBase
from chatbridge.stores._codec import (
    entry_from_json,
    entry_to_json,
    forgotten_since,
    pending_of,
    turns_from_json,
    undecodable,
    user_hash,
)
from chatbridge.stores.redis._conn import (
    BACKOFF,
    COUNTERS,
    DEFAULT_TTL,
    MAX_ATTEMPTS,
    RedisConnection,
)
from chatbridge.stores.redis._cursors import RedisCursors
from chatbridge.stores.redis._inbox import RedisInbox
from chatbridge.stores.redis._lease import DEFAULT_POLL, RedisLeases, RedisNotices, fence_key
from chatbridge.stores.redis._ledger import RedisLedger
from chatbridge.stores.redis._links import RedisLinks

__all__ = ["DEFAULT_TTL", "RedisStore"]


class RedisStore(StoreBase):
    """Sessions, rings, usage and the inbox in Redis; see the module docstring
    for the key layout. Sessions and memory are here; the other contracts are
    parts over the same connection (`_inbox`, `_cursors`, `_ledger`,
    `_links`), and so are the leases and notices of `replication`."""

    def __init__(
        self,
        url: str,
        *,
        max_entries: int,
        prefix: str = "chatbridge:",
        ttl: float = DEFAULT_TTL,
    ) -> None:
        self._db = RedisConnection(url, max_entries=max_entries, prefix=prefix, ttl=ttl)
        self._inbox = RedisInbox(self._db)
        self._cursors = RedisCursors(self._db)
        self._ledger = RedisLedger(self._db)
        self._links = RedisLinks(self._db)

    async def open(self) -> None:
        """Connect and PING; an unreachable server or a bad URL raises `StoreError`."""
        await self._db.open()

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._db.aclose()

    def replication(self, *, lease_ttl: float, poll: float = DEFAULT_POLL) -> Replication:
        """Leases and cancel notices in this store's Redis, for replicas; a
        waiting holder polls a taken lease every `poll` s."""
        return Replication(RedisLeases(self._db, ttl=lease_ttl, poll=poll), RedisNotices(self._db))

    # -- keys ---------------------------------------------------------------

    def _ring_key(self, user: str) -> str:
        return f"{self._db.prefix}ring:{user}"

    def _session_key(self, key: str) -> str:
        return f"{self._db.prefix}session:{key}"

    def _turns_key(self, key: str) -> str:
        return f"{self._db.prefix}turns:{key}"

    def _sessions_set(self, user: str) -> str:
        return f"{self._db.prefix}user-sessions:{user}"

    def _usage_key(self, user: str, day: str) -> str:
        day = day.replace("%", "%25").replace(":", "%3A")
        return f"{self._db.prefix}usage:{day}:{user}"

    def _days_set(self, user: str) -> str:
        return f"{self._db.prefix}user-days:{user}"

    def _tombstone_key(self, user: str) -> str:
        return f"{self._db.prefix}forgotten:{user_hash(user)}"

    # -- the Store protocol -------------------------------------------------

    async def load_session(self, key: str) -> Session | None:
        hkey, tkey = self._session_key(key), self._turns_key(key)
        fields, raw_turns = await self._db.read(
            [(hkey, "hgetall", ()), (tkey, "lrange", (0, -1))], transaction=True
        )
        if not fields:
            return None
        try:
            user = fields["user"]
            started_at, last_active = float(fields["started_at"]), float(fields["last_active"])
            if undecodable(user):
                raise ValueError("user is not UTF-8")
        except (KeyError, ValueError):
            # A damaged session costs the session (a fresh one starts; its next
            # commit rewrites the hash), not the conversation.
            self._db.skip(hkey, "session")
            return None
        return Session(key, user, started_at, last_active, self._turns(tkey, raw_turns))

    async def save_session(self, session: Session | None, *, key: str) -> None:
        hkey, tkey = self._session_key(key), self._turns_key(key)
        if session is None:
            # DEL works on any type, so there is nothing to check; the owner's
            # user-sessions entry goes stale (forget checks ownership).
            client = self._db.client()
            with self._db.errors("write"):
                await client.delete(hkey, tkey)
            return
        owned = self._sessions_set(session.user)
        turns = [_turn_json(t) for t in session.turns]

        def queue(tx: Pipeline) -> None:
            tx.delete(hkey, tkey)
            tx.hset(hkey, mapping=_session_fields(session))
            if turns:
                tx.rpush(tkey, *turns)
            tx.sadd(owned, key)
            for k in (hkey, tkey, owned):
                tx.pexpire(k, self._db.ttl_ms)

        await self._db.transaction({hkey: "hash", tkey: "list", owned: "set"}, queue)

    async def commit_exchange(self, exchange: Exchange) -> None:
        """One MULTI/EXEC: session, its new turns, ring entry (filed under
        `ring_user`), usage, then both trims and the expiries — or nothing if
        `ring_user` was forgotten at or after the session started. The inbox
        entry `exchange.inbox_key` is marked done in that MULTI, or by itself
        when the user was forgotten."""
        user, session, usage = exchange.ring_user, exchange.session, exchange.usage
        key = session.key
        hkey, tkey, owned = (
            self._session_key(key),
            self._turns_key(key),
            self._sessions_set(session.user),
        )
        rkey, ukey, days = (
            self._ring_key(user),
            self._usage_key(user, exchange.day),
            self._days_set(user),
        )
        tomb = self._tombstone_key(user)
        kept = len(session.turns)
        added = [_turn_json(t) for t in session.turns[kept - exchange.added_turns :]]
        entry = json.dumps(entry_to_json(replace(exchange.entry, user=user)), ensure_ascii=False)

        def queue(tx: Pipeline) -> None:
            tx.get(tomb)  # first: did a forget land after the check below?
            self._inbox.queue_done(tx, exchange.inbox_key)
            self._ledger.queue_settle(tx, exchange.settlement)
            tx.hset(hkey, mapping=_session_fields(session))
            if added:
                tx.rpush(tkey, *added)
            if kept:
                tx.ltrim(tkey, -kept, -1)
            else:
                tx.delete(tkey)
            tx.sadd(owned, key)
            tx.rpush(rkey, entry)
            tx.ltrim(rkey, -self._db.max_entries, -1)
            tx.hincrby(ukey, "input_tokens", usage.input_tokens)
            tx.hincrby(ukey, "output_tokens", usage.output_tokens)
            tx.sadd(days, exchange.day)
            for k in (hkey, tkey, owned, rkey):
                tx.pexpire(k, self._db.ttl_ms)
            tx.pexpire(ukey, self._db.usage_ttl_ms)
            tx.pexpire(days, max(self._db.ttl_ms, self._db.usage_ttl_ms))

        expect = {hkey: "hash", tkey: "list", owned: "set", rkey: "list", ukey: "hash", days: "set"}
        expect[tomb] = "string"
        expect |= self._inbox.done_types(exchange.inbox_key)
        client = self._db.client()
        with self._db.errors("write"):
            at = await self._db.check_types(expect, ukey, tombstone=tomb)
            if forgotten_since(at, session.started_at):
                if exchange.inbox_key:  # answered all the same: no redelivery
                    await self.inbox_done(exchange.inbox_key)
                if exchange.settlement is not None:  # and the tokens were used
                    await self.ledger_settle(exchange.settlement)
                return  # a reply in flight during forget(); see Memory.forget
            async with client.pipeline(transaction=True) as tx:
                if exchange.fence > 0:
                    await self._check_fence(tx, exchange)
                    tx.multi()
                queue(tx)
                try:
                    results = await tx.execute()
                except WatchError as err:  # a new holder INCRed the fence meanwhile
                    raise self._lease_lost(exchange) from err
        if forgotten_since(self._db.tombstone_at(tomb, results[0]), session.started_at):
            await self._erase(user, at=None, also=(hkey, tkey))  # forget won the race

    async def _check_fence(self, tx: Pipeline, exchange: Exchange) -> None:
        """WATCH the conversation's fence and raise `LeaseLost` if a newer holder
        already took it; the WATCH makes the commit's EXEC fail if one takes it
        before the EXEC."""
        fkey = fence_key(self._db.prefix, exchange.fence_key)
        await tx.watch(fkey)
        current = await tx.get(fkey)
        try:
            newer = current is not None and int(current) > exchange.fence
        except ValueError as err:
            raise self._db.corrupt(fkey, f"fence {current!r} is not an integer") from err
        if newer:
            raise self._lease_lost(exchange)

    def _lease_lost(self, exchange: Exchange) -> LeaseLost:
        return LeaseLost(
            f"the lease on {exchange.fence_key} at {self._db.shown} passed to another replica "
            f"(fence {exchange.fence} is stale); the exchange was not stored"
        )

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """Entries newer than `since`, oldest first; user "" (unknown owner) gets none."""
        if not user:
            return []
        rkey = self._ring_key(user)
        (raw,) = await self._db.read([(rkey, "lrange", (0, -1))])
        entries = []
        for index, item in enumerate(raw):
            try:
                if undecodable(item):
                    raise ValueError("not UTF-8")
                entries.append(entry_from_json(json.loads(item)))
            except ValueError:  # json.JSONDecodeError is a ValueError; a damaged entry is skipped
                self._db.skip(rkey, index)
        newer = [e for e in entries if e.timestamp > since]
        return newer[-self._db.max_entries :]

    async def forget(self, user: str) -> None:
        """DEL the user's ring, usage days and own sessions and SET the
        tombstone in one transaction; then mark the user's pending inbox
        entries (received until then) done."""
        now = time.time()
        await self._erase(user, at=now)
        for key in pending_of(await self.inbox_pending(), user, now):
            await self.inbox_done(key)

    async def _erase(self, user: str, *, at: float | None, also: Sequence[str] = ()) -> None:
        """`forget`'s transaction: DEL the user's keys and `also`; SET the tombstone
        to `at` unless it is None (a commit cleaning up after a lost race)."""
        owned, days = self._sessions_set(user), self._days_set(user)
        tomb, tomb_ms = self._tombstone_key(user), max(self._db.ttl_ms, self._db.usage_ttl_ms)
        client = self._db.client()
        with self._db.errors("forget"):
            for attempt in range(MAX_ATTEMPTS):
                async with client.pipeline(transaction=True) as tx:
                    try:
                        await tx.watch(owned, days)
                        keys, day_names = await self._db.read(
                            [(owned, "smembers", ()), (days, "smembers", ())]
                        )
                        hkeys = [self._session_key(k) for k in sorted(keys)]
                        if hkeys:
                            await tx.watch(*hkeys)
                        owners = await self._db.read([(h, "hget", ("user",)) for h in hkeys])
                        doomed = [self._ring_key(user), owned, days]
                        doomed += [self._usage_key(user, d) for d in sorted(day_names)]
                        for k, owner in zip(sorted(keys), owners, strict=True):
                            if owner is None or owner == user:
                                doomed += [self._session_key(k), self._turns_key(k)]
                        tx.multi()
                        tx.delete(*doomed, *also)
                        if at is not None:
                            # Taken as late as possible: a session started after
                            # this instant read the ring after the DEL.
                            tx.set(tomb, repr(max(at, time.time())), px=tomb_ms)
                        await tx.execute()
                        return
                    except WatchError:
                        pass
                # Jittered backoff, so a user's commits in between let forget through.
                await asyncio.sleep(random.uniform(0, BACKOFF * (attempt + 1)))
        raise self._db.busy("forget")

    async def usage(self, user: str, *, day: str) -> Usage:
        ukey = self._usage_key(user, day)
        (values,) = await self._db.read([(ukey, "hmget", (list(COUNTERS),))])
        return Usage(*(self._db.counter(ukey, v) for v in values))

    # -- the parts ----------------------------------------------------------

    async def inbox_add(self, entry: InboxEntry) -> bool:
        return await self._inbox.inbox_add(entry)

    async def inbox_add_many(self, entries: Sequence[InboxEntry]) -> list[bool]:
        return await self._inbox.inbox_add_many(entries)

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        await self._inbox.inbox_progress(key, sent=sent, answer=answer)

    async def inbox_done(self, key: str) -> None:
        await self._inbox.inbox_done(key)

    async def inbox_pending(self) -> list[InboxEntry]:
        return await self._inbox.inbox_pending()

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        return await self._inbox.inbox_pending_of(conversation)

    async def inbox_is_pending(self, key: str) -> bool:
        return await self._inbox.inbox_is_pending(key)

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        await self._cursors.cursor_advance(platform, channel, last_id, at=at)

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        return await self._cursors.cursors(platform, since=since, limit=limit)

    async def ledger_reserve(self, hold: Hold) -> Verdict:
        return await self._ledger.ledger_reserve(hold)

    async def ledger_settle(self, settlement: Settlement) -> None:
        await self._ledger.ledger_settle(settlement)

    async def ledger_snapshots(self, hold: Hold) -> dict[str, Snapshot]:
        return await self._ledger.ledger_snapshots(hold)

    async def ledger_rows(self, *, since_day: str) -> list[LedgerRow]:
        return await self._ledger.ledger_rows(since_day=since_day)

    async def link_offer(self, user: str, code_hash: str, *, expires_at: float) -> None:
        await self._links.link_offer(user, code_hash, expires_at=expires_at)

    async def link_take(self, code_hash: str, *, now: float) -> str | None:
        return await self._links.link_take(code_hash, now=now)

    async def link_attempt(self, user: str, *, now: float, failed: bool) -> float | None:
        return await self._links.link_attempt(user, now=now, failed=failed)

    async def link_join(self, first: str, second: str) -> str:
        return await self._links.link_join(first, second)

    async def link_split(self, user: str) -> bool:
        return await self._links.link_split(user)

    async def link_group(self, user: str) -> tuple[str, ...]:
        return await self._links.link_group(user)

    # -- helpers ------------------------------------------------------------

    def _turns(self, tkey: str, raw: list[str]) -> list[Turn]:
        """The session's turns; a damaged one is skipped (and reported once)."""
        turns = []
        for index, item in enumerate(raw):
            try:
                if undecodable(item):
                    raise ValueError("not UTF-8")
                turns += turns_from_json([json.loads(item)])
            except ValueError:
                self._db.skip(tkey, index)
        return turns


def _session_fields(s: Session) -> dict[FieldT, EncodableT]:
    return {"user": s.user, "started_at": repr(s.started_at), "last_active": repr(s.last_active)}


def _turn_json(t: Turn) -> str:
    return json.dumps({"role": t.role, "content": t.content}, ensure_ascii=False)
