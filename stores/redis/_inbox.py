"""The Redis store's inbox (see `core.ports.store.Inbox`); the layout is in `store`.

Each call that reads before it writes is one Lua script, so it is a single
atomic step for every client of the server: the redelivery check of two bot
processes adding the same key cannot both pass. A script first checks the
TYPE of each key it touches (and that stored numbers are numbers) and returns
``[key, reason]`` instead of writing anything if one is foreign, which becomes
`StoreCorrupt` naming the key. `commit_exchange` runs the done script inside
its MULTI/EXEC (as EVAL, so a server that lost its script cache cannot fail
only that part of the transaction).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from redis.asyncio.client import Pipeline

from chatbridge.core.models import Conversation, InboxEntry
from chatbridge.core.ports.store import DEDUPE_WINDOW
from chatbridge.stores._codec import (
    answer_to_json,
    message_from_json,
    message_to_json,
    sent_from_json,
    sent_to_json,
    undecodable,
)
from chatbridge.stores.redis._conn import RedisConnection, _lua

# KEYS: entry, done marker, pending, seq, the conversation's pending.  ARGV:
# member, received_at, cutoff (a marker at or after it refuses), message, sent,
# answer, has_answer, ttl_ms, conversation.
_ADD = _lua("""
local bad = check(1, 'hash') or check(2, 'string') or check(3, 'zset') or check(4, 'string')
  or check(5, 'zset')
if bad then return bad end
local seq = redis.call('GET', KEYS[4])
if seq and not string.match(seq, '^%d+$') then return {KEYS[4], 'it is not a counter'} end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local done = redis.call('GET', KEYS[2])
if done then
  local at = tonumber(done)
  if not at then return {KEYS[2], 'its time is not a number'} end
  if at >= tonumber(ARGV[3]) then return 0 end
end
local n = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'received_at', ARGV[2], 'seq', n, 'message', ARGV[4], 'sent', ARGV[5],
  'conversation', ARGV[9])
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'answer', ARGV[6]) end
redis.call('DEL', KEYS[2])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
for i = 1, 5 do if i ~= 2 then redis.call('PEXPIRE', KEYS[i], ARGV[8]) end end
return 1
""")
# KEYS: entry.  ARGV: sent, answer, has_answer.
_PROGRESS = _lua("""
local bad = check(1, 'hash')
if bad then return bad end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'sent', ARGV[1])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'answer', ARGV[2]) end
return 1
""")
# KEYS: entry, pending, done marker.  ARGV: member, now, window_ms, the prefix
# of the conversations' pending sets (their key is in the entry's hash, so an
# entry added before that field existed has none to leave).
_DONE = _lua("""
local bad = check(1, 'hash') or check(2, 'zset') or check(3, 'string')
if bad then return bad end
local conversation = redis.call('HGET', KEYS[1], 'conversation')
if conversation then
  local of = ARGV[4] .. conversation
  local t = redis.call('TYPE', of).ok
  if t ~= 'none' and t ~= 'zset' then return {of, 'it is a ' .. t .. ', not a zset'} end
  redis.call('ZREM', of, ARGV[1])
end
local gone = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if gone == 1 then redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3]) end
return gone
""")
# KEYS: pending, then the entry of each member.  ARGV: the members.
_UNLIST = _lua("""
local bad = check(1, 'zset')
if bad then return bad end
for i, member in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then redis.call('ZREM', KEYS[1], member) end
end
return 0
""")
_WINDOW_MS = int(DEDUPE_WINDOW * 1000)


class RedisInbox:
    """The inbox methods, and what `commit_exchange` needs to mark one done."""

    def __init__(self, db: RedisConnection) -> None:
        self._db = db

    def _inbox_key(self, key: str) -> str:
        return f"{self._db.prefix}inbox:{key}"

    def _inbox_done_key(self, key: str) -> str:
        return f"{self._db.prefix}inbox-done:{key}"

    def _inbox_pending_key(self) -> str:
        return f"{self._db.prefix}inbox-pending"

    def _inbox_seq_key(self) -> str:
        return f"{self._db.prefix}inbox-seq"

    def _inbox_of_prefix(self) -> str:
        return f"{self._db.prefix}inbox-of:"

    async def inbox_add(self, entry: InboxEntry) -> bool:
        key = entry.key
        keys = [self._inbox_key(key), self._inbox_done_key(key)]
        keys += [self._inbox_pending_key(), self._inbox_seq_key()]
        conversation = entry.message.conversation.key
        keys.append(self._inbox_of_prefix() + conversation)
        args = [
            key,
            repr(entry.received_at),
            repr(entry.received_at - DEDUPE_WINDOW),
            json.dumps(message_to_json(entry.message), ensure_ascii=False),
            _sent_json(entry.sent),
            answer_to_json(entry.answer) or "",
            "0" if entry.answer is None else "1",
            str(self._db.ttl_ms),
            conversation,
        ]
        return bool(await self._db.script(_ADD, keys, args) == 1)

    async def inbox_add_many(self, entries: Sequence[InboxEntry]) -> list[bool]:
        """One atomic script per entry, in order: a failure keeps those before it."""
        return [await self.inbox_add(entry) for entry in entries]

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        args = [_sent_json(sent), answer_to_json(answer) or "", "0" if answer is None else "1"]
        await self._db.script(_PROGRESS, [self._inbox_key(key)], args)

    async def inbox_done(self, key: str) -> None:
        keys, args = self._done_call(key)
        await self._db.script(_DONE, keys, args)

    async def inbox_pending(self) -> list[InboxEntry]:
        """Oldest `received_at` first, ties in the order they were added.

        Members whose entry expired (nobody finished it within `ttl`) are
        skipped and removed from inbox-pending.
        """
        return await self._entries(self._inbox_pending_key())

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        """The conversation's set only: two round trips, whatever else is pending."""
        return await self._entries(self._inbox_of_prefix() + conversation.key)

    async def _entries(self, pkey: str) -> list[InboxEntry]:
        """The entries listed in the sorted set `pkey`, in (received_at, seq) order."""
        (members,) = await self._db.read([(pkey, "zrange", (0, -1))])
        hkeys = [self._inbox_key(m) for m in members]
        rows = await self._db.read([(h, "hgetall", ()) for h in hkeys], transaction=True)
        found: list[tuple[tuple[float, int], InboxEntry]] = []
        expired = []
        for member, hkey, fields in zip(members, hkeys, rows, strict=True):
            if not fields:
                expired.append(member)  # or done since the ZRANGE
                continue
            try:
                if undecodable(fields):
                    raise ValueError("not UTF-8")
                found.append(_entry(member, fields))
            except (KeyError, ValueError):  # json.JSONDecodeError is a ValueError
                self._db.skip(hkey, "entry")  # unanswerable: costs this entry only
        if expired:  # dropped only if still without an entry
            await self._db.script(_UNLIST, [pkey, *(self._inbox_key(m) for m in expired)], expired)
        found.sort(key=lambda pair: pair[0])
        return [entry for _, entry in found]

    async def inbox_is_pending(self, key: str) -> bool:
        (found,) = await self._db.read([(self._inbox_key(key), "exists", ())])
        return bool(found)

    # -- for commit_exchange ------------------------------------------------

    def done_types(self, key: str) -> dict[str, str]:
        """The keys marking `key` done touches, with their types, for `_check_types`."""
        if not key:
            return {}
        return {
            self._inbox_key(key): "hash",
            self._inbox_pending_key(): "zset",
            self._inbox_done_key(key): "string",
        }

    def queue_done(self, tx: Pipeline, key: str) -> None:
        """Add marking `key` done to a MULTI (types checked by the caller)."""
        if key:
            keys, args = self._done_call(key)
            tx.eval(_DONE.text, len(keys), *keys, *args)

    def _done_call(self, key: str) -> tuple[list[str], list[str]]:
        keys = [self._inbox_key(key), self._inbox_pending_key(), self._inbox_done_key(key)]
        return keys, [key, repr(time.time()), str(_WINDOW_MS), self._inbox_of_prefix()]


def _sent_json(sent: tuple[str, ...]) -> str:
    return json.dumps(sent_to_json(sent), ensure_ascii=False)


def _entry(member: str, fields: dict[str, str]) -> tuple[tuple[float, int], InboxEntry]:
    """An entry hash as ((received_at, seq), entry); KeyError/ValueError if malformed."""
    received_at, seq = float(fields["received_at"]), int(fields["seq"])
    message = message_from_json(json.loads(fields["message"]))
    sent = sent_from_json(json.loads(fields["sent"]))
    entry = InboxEntry(member, message, received_at, fields.get("answer"), sent)
    return (received_at, seq), entry
