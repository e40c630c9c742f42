"""The Redis store's limits ledger (`core.ledger`): one Lua script per reserve
and per settle, so every replica's check-and-hold is one atomic step.

Keys (``P`` is the store's prefix; the period is a day ``2026-12-02`` or a
month ``2026-12`` and holds no ':', so it ends at the first ':')::

    P ledger:{period}:{account}   HASH  tokens_in, tokens_out, requests, refused, nano_usd
    P ledger-holds:{account}      HASH  hold id -> "expires_at day month tokens nano_usd"
    P ledger-stamps:{account}     ZSET  hold id by admission time (messages_per_minute)
    P ledger-notice:{account}     STRING the time of the last messages_per_minute notice
    P ledger-periods:{account}    SET   the periods that have a counter hash
    P ledger-accounts             SET   every account, for `chatbridge usage`
    P links                       HASH  read by reserve: linked ID -> person key (`_links`)

Counters, periods and accounts live `LEDGER_TTL` (400 days, refreshed on each
write); holds and stamps a day (each is pruned by the account's next reserve
once past its own time); a notice two minutes. The scripts check every key's
type first and refuse (`StoreCorrupt`, nothing written) one that is foreign.

Reserve is the one ledger call on every limited message's path, so it is one
round trip that also resolves the sender's link (`Hold.sender`), and its
command is packed once per sender, accounts and day: only the five values that
change per message are encoded each time (`_ReserveFrame`), and it goes
straight to a connection (`RedisConnection.call_packed`).
"""

from __future__ import annotations

from typing import NamedTuple

from redis.asyncio.client import Pipeline

from chatbridge.core.ledger import (
    NANO,
    PERSON_PREFIX,
    RATE_WINDOW,
    Hold,
    HoldRow,
    LedgerRow,
    Settlement,
    Snapshot,
    Tally,
    Verdict,
)
from chatbridge.stores.redis._conn import RedisConnection, _lua

__all__ = ["LEDGER_TTL", "RedisLedger"]

LEDGER_TTL = 400 * 86400.0
_KEEP_MS = 86_400_000
_FIELDS = ("tokens_in", "tokens_out", "requests", "refused", "nano_usd")
_PER = 6  # keys per account: day, month, holds, stamps, notice, periods

_TYPES = """
local per = 6
local function types(n)
  for i = 0, n - 1 do
    local k = 1 + per * i
    local bad = check(k + 1, 'hash') or check(k + 2, 'hash') or check(k + 3, 'hash')
      or check(k + 4, 'zset') or check(k + 5, 'string') or check(k + 6, 'set')
    if bad then return bad end
  end
  return check(1, 'set')
end
local function count(k, field, by, ttl)
  redis.call('HINCRBY', KEYS[k], field, by)
  redis.call('PEXPIRE', KEYS[k], ttl)
end
local function remember(k, account, day, month, ttl)
  redis.call('SADD', KEYS[k + 6], day, month)
  redis.call('PEXPIRE', KEYS[k + 6], ttl)
  redis.call('SADD', KEYS[1], account)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
"""
# KEYS: accounts, then per account day, month, holds, stamps, notice, periods,
# then links.  ARGV: now, id, expires_at, tokens, nano (the five that change per
# message), day, month, n, keep_ms, ttl_ms, window, sender ("" = none), then per
# account: name, tokens/day, tokens/month, messages/minute, nano/day, nano/month
# ("" = no limit).  The sender's person must own the first account, else the
# reply is "moved PERSON" and nothing is written.
_RESERVE = _lua(
    _TYPES
    + """
local now, tokens, nano = tonumber(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[5])
local day, month, n, window = ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[11])
local links = 2 + per * n
local bad = types(n) or check(links, 'hash')
if bad then return bad end
if ARGV[12] ~= '' then
  local person = redis.call('HGET', KEYS[links], ARGV[12]) or ARGV[12]
  if '"""
    + PERSON_PREFIX
    + """' .. person ~= ARGV[13] then return 'moved ' .. person end
end
local function num(v) return tonumber(v) or 0 end
local function lim(v) if v == '' then return nil end return tonumber(v) end
local verdict = nil
for i = 0, n - 1 do
  local k, a = 1 + per * i, 12 + 6 * i
  local hd_t, hd_n, hm_t, hm_n = 0, 0, 0, 0
  local holds = redis.call('HGETALL', KEYS[k + 3])
  for j = 1, #holds, 2 do
    local exp, hday, hmonth, ht, hn = string.match(holds[j + 1], '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
    if not exp or not tonumber(exp) or tonumber(exp) <= now then
      redis.call('HDEL', KEYS[k + 3], holds[j])
    else
      if hday == day then hd_t = hd_t + num(ht); hd_n = hd_n + num(hn) end
      if hmonth == month then hm_t = hm_t + num(ht); hm_n = hm_n + num(hn) end
    end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[k + 4], '-inf', now - window)
  if not verdict then
    local recent = redis.call('ZCARD', KEYS[k + 4])
    local d = redis.call('HMGET', KEYS[k + 1], 'tokens_in', 'tokens_out', 'nano_usd')
    local m = redis.call('HMGET', KEYS[k + 2], 'tokens_in', 'tokens_out', 'nano_usd')
    local dt, mt = num(d[1]) + num(d[2]), num(m[1]) + num(m[2])
    local kind = nil
    local mpm, tpd, tpm = lim(ARGV[a + 4]), lim(ARGV[a + 2]), lim(ARGV[a + 3])
    local npd, npm = lim(ARGV[a + 5]), lim(ARGV[a + 6])
    if mpm and recent + 1 > mpm then kind = 'messages_per_minute'
    elseif tpd and dt + hd_t + tokens > tpd then kind = 'tokens_per_day'
    elseif tpm and mt + hm_t + tokens > tpm then kind = 'tokens_per_month'
    elseif npd and num(d[3]) + hd_n + nano > npd then kind = 'usd_per_day'
    elseif npm and num(m[3]) + hm_n + nano > npm then kind = 'usd_per_month'
    end
    if kind then
      local notify = 1
      if kind == 'messages_per_minute' then
        local last = tonumber(redis.call('GET', KEYS[k + 5]) or '')
        if last and now - last < window then notify = 0
        else redis.call('SET', KEYS[k + 5], ARGV[1], 'PX', 2 * window * 1000) end
      end
      verdict = 'refused ' .. notify .. ' ' .. kind .. ' ' .. ARGV[a + 1]
    end
  end
end
for i = 0, n - 1 do
  local k, a = 1 + per * i, 12 + 6 * i
  if verdict then
    count(k + 1, 'refused', 1, ARGV[10])
    count(k + 2, 'refused', 1, ARGV[10])
    remember(k, ARGV[a + 1], day, month, ARGV[10])
  else
    redis.call('HSET', KEYS[k + 3], ARGV[2],
      ARGV[3] .. ' ' .. day .. ' ' .. month .. ' ' .. ARGV[4] .. ' ' .. ARGV[5])
    redis.call('PEXPIRE', KEYS[k + 3], ARGV[9])
    redis.call('ZADD', KEYS[k + 4], ARGV[1], ARGV[2])
    redis.call('PEXPIRE', KEYS[k + 4], ARGV[9])
  end
end
if verdict then return verdict end
return 1
"""
)
# KEYS as for reserve.  ARGV: id, tokens_in, tokens_out, nano, answered, day,
# month, n, ttl_ms, then each account's name.
_SETTLE = _lua(
    _TYPES
    + """
local n = tonumber(ARGV[8])
local bad = types(n)
if bad then return bad end
for i = 0, n - 1 do
  local k = 1 + per * i
  redis.call('HDEL', KEYS[k + 3], ARGV[1])
  if ARGV[5] == '0' then redis.call('ZREM', KEYS[k + 4], ARGV[1]) end
  for p = 1, 2 do
    count(k + p, 'tokens_in', ARGV[2], ARGV[9])
    count(k + p, 'tokens_out', ARGV[3], ARGV[9])
    count(k + p, 'requests', 1, ARGV[9])
    count(k + p, 'nano_usd', ARGV[4], ARGV[9])
  end
  remember(k, ARGV[9 + i + 1], ARGV[6], ARGV[7], ARGV[9])
end
return 1
"""
)


class _ReserveFrame(NamedTuple):
    head: bytes  # the array's length, EVALSHA, the sha, the number of keys, the keys
    tail: bytes  # the arguments after the five that change per message


_ADMITTED = Verdict(True)
_FRAMES_KEPT = 10_000  # senders' reserve frames kept before the cache starts over


def _bulk(value: str) -> bytes:
    """One RESP bulk string (encoded as the client encodes: UTF-8, surrogateescape)."""
    data = value.encode("utf-8", "surrogateescape")
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _limit(value: float | None, scale: int = 1) -> str:
    return "" if value is None else str(round(value * scale))


class RedisLedger:
    """The four ledger methods, and settling inside a commit, over the store's connection."""

    def __init__(self, db: RedisConnection) -> None:
        self._db = db
        # The reserve command packed but for one message's values, by sender's
        # accounts, day, month and sender.
        self._frames: dict[tuple[object, ...], _ReserveFrame] = {}

    def _ledger_keys(self, account: str, day: str, month: str) -> list[str]:
        p = self._db.prefix
        return [
            f"{p}ledger:{day}:{account}",
            f"{p}ledger:{month}:{account}",
            f"{p}ledger-holds:{account}",
            f"{p}ledger-stamps:{account}",
            f"{p}ledger-notice:{account}",
            f"{p}ledger-periods:{account}",
        ]

    def _accounts_key(self) -> str:
        return f"{self._db.prefix}ledger-accounts"

    async def ledger_reserve(self, hold: Hold) -> Verdict:
        frame = self._frames.get((hold.accounts, hold.day, hold.month, hold.sender))
        if frame is None:
            frame = self._reserve_frame(hold)
        packed = b"".join(
            (
                frame.head,
                _bulk(repr(hold.now)),
                _bulk(hold.id),
                _bulk(repr(hold.expires_at)),
                _bulk(str(hold.tokens)),
                _bulk(str(hold.nano_usd)),
                frame.tail,
            )
        )
        result = await self._db.call_packed(packed, _RESERVE.text)
        if result == 1:
            return _ADMITTED
        if isinstance(result, list):
            raise self._db.corrupt(str(result[0]), str(result[1]))
        text = str(result)
        if text.startswith("moved "):
            return Verdict(False, moved=text[6:])
        _, notify, kind, refusing = text.split(" ", 3)  # "refused 1 KIND ACCOUNT"
        return Verdict(False, refusing, kind, notify == "1")

    def _reserve_frame(self, hold: Hold) -> _ReserveFrame:
        """The reserve command's bytes but for the five values of one message."""
        keys = [self._accounts_key()]
        args = [
            hold.day,
            hold.month,
            str(len(hold.accounts)),
            str(_KEEP_MS),
            str(int(LEDGER_TTL * 1000)),
            repr(RATE_WINDOW),
            hold.sender,
        ]
        for account in hold.accounts:
            lim = account.limits
            keys += self._ledger_keys(account.key, hold.day, hold.month)
            args += [
                account.key,
                _limit(lim.tokens_per_day),
                _limit(lim.tokens_per_month),
                _limit(lim.messages_per_minute),
                _limit(lim.usd_per_day, NANO),
                _limit(lim.usd_per_month, NANO),
            ]
        keys.append(f"{self._db.prefix}links")
        count = 3 + len(keys) + 5 + len(args)  # EVALSHA, sha, numkeys, keys, args
        head = [b"*%d\r\n" % count, _bulk("EVALSHA"), _bulk(_RESERVE.sha), _bulk(str(len(keys)))]
        frame = _ReserveFrame(
            b"".join(head + [_bulk(k) for k in keys]), b"".join(_bulk(a) for a in args)
        )
        frames = self._frames
        if len(frames) > _FRAMES_KEPT:
            frames.clear()
        frames[(hold.accounts, hold.day, hold.month, hold.sender)] = frame
        return frame

    async def ledger_settle(self, settlement: Settlement) -> None:
        keys, args = self._settle_call(settlement)
        await self._db.script(_SETTLE, keys, args)

    def queue_settle(self, tx: Pipeline, settlement: Settlement | None) -> None:
        """Add settling to a commit's MULTI (as EVAL; the script checks its key types)."""
        if settlement is not None:
            keys, args = self._settle_call(settlement)
            tx.eval(_SETTLE.text, len(keys), *keys, *args)

    def _settle_call(self, s: Settlement) -> tuple[list[str], list[str]]:
        keys = [self._accounts_key()]
        for account in s.accounts:
            keys += self._ledger_keys(account, s.day, s.month)
        args = [
            s.id,
            str(s.tokens_in),
            str(s.tokens_out),
            str(s.nano_usd),
            "1" if s.answered else "0",
            s.day,
            s.month,
            str(len(s.accounts)),
            str(int(LEDGER_TTL * 1000)),
            *s.accounts,
        ]
        return keys, args

    async def ledger_snapshots(self, hold: Hold) -> dict[str, Snapshot]:
        calls = []
        for account in hold.accounts:
            day, month, holds, stamps, notice, _ = self._ledger_keys(
                account.key, hold.day, hold.month
            )
            calls += [
                (day, "hmget", (list(_FIELDS),)),
                (month, "hmget", (list(_FIELDS),)),
                (holds, "hgetall", ()),
                (stamps, "zcount", (f"({hold.now - RATE_WINDOW!r}", "+inf")),
                (notice, "get", ()),
            ]
        results = await self._db.read(calls, transaction=True)
        found = {}
        for index, account in enumerate(hold.accounts):
            day, month, holds, recent, notice = results[5 * index : 5 * index + 5]
            held_day, held_month = [0, 0], [0, 0]
            for raw in holds.values():
                row = _hold_row(raw)
                if row is None or row.expires_at <= hold.now:
                    continue
                if row.day == hold.day:
                    held_day = [held_day[0] + row.tokens, held_day[1] + row.nano_usd]
                if row.month == hold.month:
                    held_month = [held_month[0] + row.tokens, held_month[1] + row.nano_usd]
            found[account.key] = Snapshot(
                _tally(day),
                _tally(month),
                (held_day[0], held_day[1]),
                (held_month[0], held_month[1]),
                int(recent),
                float(notice) if notice else None,
            )
        return found

    async def ledger_rows(self, *, since_day: str) -> list[LedgerRow]:
        (accounts,) = await self._db.read([(self._accounts_key(), "smembers", ())])
        accounts = sorted(accounts)
        p = self._db.prefix
        periods = await self._db.read(
            [(f"{p}ledger-periods:{a}", "smembers", ()) for a in accounts]
        )
        wanted = [
            (account, day)
            for account, days in zip(accounts, periods, strict=True)
            for day in sorted(days)
            if len(day) == 10 and day >= since_day
        ]
        values = await self._db.read(
            [(f"{p}ledger:{day}:{account}", "hmget", (list(_FIELDS),)) for account, day in wanted]
        )
        return [
            LedgerRow(account, day, _tally(v))
            for (account, day), v in zip(wanted, values, strict=True)
        ]


def _tally(values: list[str | None]) -> Tally:
    nums = []
    for v in values:
        try:
            nums.append(int(v) if v is not None else 0)
        except ValueError:
            nums.append(0)  # a damaged counter reads as nothing used
    return Tally(*nums)


def _hold_row(raw: str) -> HoldRow | None:
    parts = raw.split()
    try:
        exp, day, month, tokens, nano = parts
        return HoldRow(day, month, int(tokens), int(nano), float(exp))
    except ValueError:
        return None
