"""The Redis store's plumbing: connection, errors, type checks, scripts and batched reads.

One `RedisConnection` per `RedisStore`, shared by its parts (`_inbox`,
`_cursors`, `_ledger`, `_links`, `_lease`), which reach Redis only through
it; see `store` for the key layout and the guarantees.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import AuthenticationError, NoScriptError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatbridge.core.ports.store import StoreCorrupt, StoreError
from chatbridge.core.urls import mask_url, url_secrets

log = logging.getLogger(__name__)

DEFAULT_TTL = 7 * 24 * 3600.0
USAGE_TTL = 8 * 24 * 3600.0
# `forget` retries when a watched key changed, i.e. the user committed meanwhile,
# after a random pause of up to attempt x BACKOFF seconds (~0.2 s in all at most).
MAX_ATTEMPTS = 20
BACKOFF = 0.001
# A server that accepts the TCP connection but never answers must not hang a commit.
_CONNECT_TIMEOUT = 5.0
_SOCKET_TIMEOUT = 10.0
COUNTERS = ("input_tokens", "output_tokens")


class _Lua(NamedTuple):
    text: str
    sha: str


def _lua(body: str) -> _Lua:
    text = _CHECK + body
    return _Lua(text, hashlib.sha1(text.encode()).hexdigest())


_CHECK = """
local function check(i, want)
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= want then return {KEYS[i], 'it is a ' .. t .. ', not a ' .. want} end
end
"""


class RedisConnection:
    """The client and the helpers every Redis write and read goes through."""

    def __init__(
        self,
        url: str,
        *,
        max_entries: int,
        prefix: str = "chatbridge:",
        ttl: float = DEFAULT_TTL,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self._url = url
        self.shown = mask_url(url)
        self._secrets = url_secrets(url)
        self.max_entries = max_entries
        self.prefix = prefix
        self.ttl_ms = max(1, int(ttl * 1000))
        self.usage_ttl_ms = int(USAGE_TTL * 1000)
        self._client: aioredis.Redis | None = None
        self._reported: set[tuple[str, object]] = set()  # damaged items already logged
        self._lane: Any = None  # a pooled connection kept for `call_packed`
        self._lane_busy = False

    async def open(self) -> None:
        """Connect and PING; an unreachable server or a bad URL raises `StoreError`."""
        if self._client is not None:
            return
        try:
            client = aioredis.from_url(
                self._url,
                decode_responses=True,
                # A stored byte that is not UTF-8 reads as a lone surrogate
                # (`_codec.undecodable`) instead of failing the whole reply.
                encoding_errors="surrogateescape",
                socket_connect_timeout=_CONNECT_TIMEOUT,
                socket_timeout=_SOCKET_TIMEOUT,
            )
        except ValueError as err:
            raise StoreError(
                f"{self.shown} is not a usable Redis URL ({self._scrub(str(err))})"
            ) from err
        try:
            with self.errors("connect"):
                await client.ping()
        except BaseException:
            await client.aclose()
            raise
        self._client = client

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        client, self._client = self._client, None
        self._lane = None  # closed with the pool
        if client is not None:
            await client.aclose()

    # -- helpers ------------------------------------------------------------

    async def transaction(
        self,
        expect: dict[str, str],
        queue: Callable[[Pipeline], None],
        *,
        counters: str | None = None,
    ) -> None:
        """Check the types of `expect`'s keys (and the integer fields of the
        `counters` hash), then run what `queue` adds in one MULTI/EXEC."""
        client = self.client()
        with self.errors("write"):
            await self.check_types(expect, counters)
            async with client.pipeline(transaction=True) as tx:
                queue(tx)
                await tx.execute()

    async def check_types(
        self, expect: dict[str, str], counters: str | None, *, tombstone: str | None = None
    ) -> float | None:
        """Raise `StoreCorrupt` for a key that exists with another type than expected;
        in the same round trip GET `tombstone` and return its time (None if absent)."""
        pipe = self.client().pipeline(transaction=False)
        for k in expect:
            pipe.type(k)
        if counters is not None:
            pipe.hmget(counters, list(COUNTERS))
        if tombstone is not None:
            pipe.get(tombstone)
        results = await pipe.execute(raise_on_error=False)
        for (k, want), found in zip(expect.items(), results, strict=False):
            if isinstance(found, Exception):
                raise found
            if found not in ("none", want):
                raise self.corrupt(k, f"it is a {found}, not a {want}")
        rest = results[len(expect) :]
        for r in rest:
            if isinstance(r, Exception):
                raise r
        if counters is not None:
            for value in rest.pop(0):
                self.counter(counters, value)
        return None if tombstone is None else self.tombstone_at(tombstone, rest[0])

    async def script(self, script: _Lua, keys: list[str], args: list[str]) -> Any:
        """EVALSHA (EVAL if the server lacks it); a ``[key, reason]`` reply raises
        `StoreCorrupt` for that key."""
        client = self.client()
        with self.errors("write"):
            try:
                result = await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                result = await client.eval(script.text, len(keys), *keys, *args)
        if isinstance(result, list):
            raise self.corrupt(str(result[0]), str(result[1]))
        return result

    async def call_packed(self, packed: bytes, script: str) -> Any:
        """Send one EVALSHA the caller packed and return its reply, with the
        client's own retries but without its per-call packing and bookkeeping
        (most of a call's client CPU here). It goes on a connection kept for
        these calls (`_lane`), or one from the pool while another call is on
        it. A server that lost its script cache is given `script` once and
        asked again."""
        pool = self.client().connection_pool
        with self.errors("write"):
            if self._lane_busy:
                conn = await pool.get_connection()
                try:
                    return await self._send_packed(conn, packed, script)
                finally:
                    await pool.release(conn)
            self._lane_busy = True
            try:
                if self._lane is None:
                    self._lane = await pool.get_connection()  # the pool closes it with the rest
                return await self._send_packed(self._lane, packed, script)
            finally:
                self._lane_busy = False

    async def _send_packed(self, conn: Any, packed: bytes, script: str) -> Any:
        async def call() -> Any:
            await conn.send_packed_command(packed, check_health=False)
            return await conn.read_response()

        async def drop(_: Exception) -> None:
            await conn.disconnect()  # the next try connects it again

        try:
            return await conn.retry.call_with_retry(call, drop)
        except NoScriptError:
            await self.client().script_load(script)
            return await conn.retry.call_with_retry(call, drop)

    async def read(
        self,
        calls: Sequence[tuple[str, str, tuple[Any, ...]]],
        *,
        transaction: bool = False,
    ) -> list[Any]:
        """Run `(key, command, args)` reads in one round trip (one MULTI/EXEC if
        `transaction`, for a consistent view); WRONGTYPE → `StoreCorrupt` naming
        the key."""
        if not calls:
            return []
        pipe = self.client().pipeline(transaction=transaction)
        for k, command, args in calls:
            getattr(pipe, command)(k, *args)
        with self.errors("read"):
            results = await pipe.execute(raise_on_error=False)
        for (k, _, _), r in zip(calls, results, strict=True):
            if isinstance(r, ResponseError) and str(r).startswith("WRONGTYPE"):
                raise self.corrupt(k, "it holds a value of the wrong type")
            if isinstance(r, Exception):
                with self.errors("read"):
                    raise r
        return list(results)

    def tombstone_at(self, key: str, value: str | None) -> float | None:
        if value is None:
            return None
        try:
            return float(value)
        except ValueError as err:
            raise self.corrupt(key, f"time {value!r} is not a number") from err

    def counter(self, ukey: str, value: str | None) -> int:
        if value is None:
            return 0
        try:
            return int(value)
        except ValueError as err:
            raise self.corrupt(ukey, f"counter {value!r} is not an integer") from err

    def client(self) -> aioredis.Redis:
        if self._client is None:
            raise StoreError(f"the redis store at {self.shown} is not open")
        return self._client

    @contextmanager
    def errors(self, op: str) -> Iterator[None]:
        """Turn redis-py and socket errors into one-sentence `StoreError`s naming the URL."""
        try:
            yield
        except AuthenticationError as err:
            raise StoreError(
                f"{self.shown} refused the login ({self._reason(err)}); "
                "check the user and password in memory.url"
            ) from err
        except (RedisConnectionError, RedisTimeoutError, OSError) as err:
            raise StoreError(
                f"{self.shown} is not reachable ({self._reason(err)}); is Redis running?"
            ) from err
        except RedisError as err:
            raise StoreError(f"{self.shown}: {op} failed ({self._reason(err)})") from err

    def _reason(self, err: BaseException) -> str:
        """The OS's words for a socket error (``Connection refused``), else redis-py's."""
        for e in (err, err.__cause__, err.__context__):
            if isinstance(e, OSError) and e.errno and e.errno > 0:
                return os.strerror(e.errno)
            if isinstance(e, OSError) and e.strerror:
                return self._scrub(e.strerror)
        if isinstance(err, RedisTimeoutError | TimeoutError):
            return "timed out"
        return self._scrub(str(err).strip().rstrip(".")) or type(err).__name__

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def skip(self, key: str, index: object) -> None:
        """Report a damaged item of `key` once (by key and position, never its value)."""
        if (key, index) in self._reported:
            return
        self._reported.add((key, index))
        log.warning(
            "redis key %r at %s: skipped damaged item %s (it cannot be read; "
            "the rest loads without it)",
            key,
            self.shown,
            index,
        )

    def corrupt(self, key: str, reason: str) -> StoreCorrupt:
        return StoreCorrupt(
            f"redis key {key!r} at {self.shown} is not chatbridge data ({reason}); "
            "it was left untouched — delete or rename it"
        )

    def busy(self, op: str) -> StoreError:
        return StoreError(
            f"{self.shown}: {op} gave up after {MAX_ATTEMPTS} attempts "
            "because other clients kept changing the same keys; retry"
        )
