"""The Redis store's channel cursors (see `core.ports.ChannelCursors`).

Keys (``P`` is the store's prefix)::

    P cursor-ids:{platform}    HASH  channel -> newest handled message ID (decimal)
    P cursor-times:{platform}  ZSET  channel, scored by the wall time of its last traffic

Advancing is one Lua script (type checks first, as the inbox's), which keeps
the larger ID — compared as decimal strings, by length and then by digits,
because Lua numbers are doubles and snowflakes pass 2^53 — and refreshes both
keys' expiry to the store's `ttl`. Listing drops the channels quieter than
asked from both keys, then reads the most recent ones.
"""

from __future__ import annotations

from chatbridge.core.models import ChannelCursor
from chatbridge.stores.redis._conn import RedisConnection, _lua

# KEYS: ids, times.  ARGV: channel, last_id, at, ttl_ms.
_ADVANCE = _lua("""
local bad = check(1, 'hash') or check(2, 'zset')
if bad then return bad end
local cur, new = redis.call('HGET', KEYS[1], ARGV[1]), ARGV[2]
if (not cur) or #new > #cur or (#new == #cur and new > cur) then
  redis.call('HSET', KEYS[1], ARGV[1], new)
end
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
if (not at) or tonumber(ARGV[3]) > tonumber(at) then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
""")
# KEYS: ids, times.  ARGV: since (exclusive upper bound of what goes).
_FORGET_QUIET = _lua("""
local bad = check(1, 'hash') or check(2, 'zset')
if bad then return bad end
local quiet = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for _, channel in ipairs(quiet) do redis.call('HDEL', KEYS[1], channel) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
return #quiet
""")


class RedisCursors:
    """The two cursor methods, over the store's connection."""

    def __init__(self, db: RedisConnection) -> None:
        self._db = db

    def _cursor_keys(self, platform: str) -> list[str]:
        return [
            f"{self._db.prefix}cursor-ids:{platform}",
            f"{self._db.prefix}cursor-times:{platform}",
        ]

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        args = [channel, str(int(last_id)), repr(float(at)), str(self._db.ttl_ms)]
        await self._db.script(_ADVANCE, self._cursor_keys(platform), args)

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        """A member whose ID is missing or not a number (damaged) is skipped."""
        ids, times = self._cursor_keys(platform)
        await self._db.script(_FORGET_QUIET, [ids, times], [repr(float(since))])
        (recent,) = await self._db.read([(times, "zrevrange", (0, max(0, limit - 1), True))])
        channels = [channel for channel, _ in recent]
        (values,) = await self._db.read([(ids, "hmget", (channels,))]) if channels else ([],)
        found = []
        for (channel, at), value in zip(recent, values, strict=True):
            if isinstance(value, str) and value.isascii() and value.isdigit():
                found.append(ChannelCursor(platform, channel, int(value), float(at)))
            else:
                self._db.skip(ids, channel)
        return found
