"""Replicas on Redis: throughput of 1, 2 and 3 `chatbridge run` processes, and
the Redis store's per-exchange cost beside SQLite.

Run: python3 -m tests.bench.bench_replicas [--quick] [--skip-store]

End to end: N real `chatbridge run` children (webhook mode, each on its own
port, Redis store on DB `DB`, which is FLUSHDBed before and after every row)
against `FakeTelegram` and `FakeOpenAI` in this process. `USERS` private chats
each send `MESSAGES` messages one after another (the next once the previous
answer is visible in the fake Bot API); message k overall goes to replica
k % N, so consecutive messages of one chat land on different replicas and
the conversation lease moves with them. Latency = webhook POST sent -> the
fake Bot API holds the final answer text. The fake LLM streams
`ANSWER_CHUNKS` chunks `CHUNK_DELAY` s apart.

Store: what the engine does per answered message, `commit_exchange` +
`ring(user, since)`, for random users among 10, 1k and 100k pre-populated
ones (two ring entries, a session and a usage row each; SQLite through
`bench_store.measure`, Redis written straight into the documented key layout
with pipelines, then measured the same way).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import redis

from chatbridge.stores.redis import RedisStore
from tests.bench import bench_store
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.redis_server import flush_allowed, redis_url
from tests.support.run_config import write_run_config
from tests.support.sse import Body, Reply

DB = 8
REDIS_URL = redis_url(DB)  # the bench run's own server, never a developer's
SECRET = "bench-Secret"
USERS = 30
MESSAGES = 5
CHAT0 = 700_000_000
ANSWER_CHUNKS = 5
CHUNK_CHARS = 8
CHUNK_DELAY = 0.01
REPLICA_COUNTS = (1, 2, 3)


def answer_to(text: str) -> str:
    """Padded to `ANSWER_CHUNKS` chunks of `CHUNK_CHARS` (the run prints what streamed)."""
    return f"re: {text}".ljust(ANSWER_CHUNKS * CHUNK_CHARS, ".")


def _reply(body: Body) -> str:
    return answer_to(str(body["messages"][-1]["content"]))


class WatchedTelegram(FakeTelegram):
    """Resolves a future once a chat shows the text it waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[int, tuple[str, asyncio.Future[float]]] = {}

    def expect(self, chat: int, text: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[chat] = (text, future)
        return future

    def _check(self, result: dict[str, Any]) -> None:
        chat = int(result["chat"]["id"])
        waited = self.waiting.get(chat)
        if waited is not None and result["text"] == waited[0] and not waited[1].done():
            waited[1].set_result(time.perf_counter())

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_sendMessage(params)
        self._check(result)
        return result

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_editMessageText(params)
        self._check(result)
        return result


def config(home: Path, openai: FakeOpenAI, telegram: FakeTelegram, port: int) -> None:
    write_run_config(
        home,
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        webhook_secret=SECRET,
        allow=[CHAT0 + c for c in range(USERS + 3)],
        engine={"shutdown_grace": "10s"},
        memory={"backend": "redis", "url": REDIS_URL},
        logging={"level": "warning"},
    )


def flushdb() -> None:
    """Empties DB `DB` of the bench's own server; never of one it did not start."""
    if not flush_allowed():
        raise SystemExit(
            "bench_replicas flushes its Redis database: unset CHATBRIDGE_TEST_REDIS_URL so "
            "it starts a redis-server of its own"
        )
    with redis.Redis.from_url(REDIS_URL) as client:
        client.flushdb()


async def wait_ready(http: aiohttp.ClientSession, port: int, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"replica on port {port} not ready")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def run_replicas(count: int, users: int, messages: int) -> dict[str, float | str]:
    flushdb()
    telegram = WatchedTelegram()
    async with telegram, FakeOpenAI() as openai:
        steps = users * messages + users + count
        openai.script(
            *[Reply(text=_reply, chunk_chars=CHUNK_CHARS, chunk_delay=CHUNK_DELAY)] * (steps + 50)
        )
        ports = [free_port() for _ in range(count)]
        with tempfile.TemporaryDirectory(prefix="bench_replicas_") as tmp:
            processes = []
            for n, port in enumerate(ports):
                home = Path(tmp) / f"replica{n}"
                home.mkdir()
                config(home, openai, telegram, port)
                processes.append(
                    await asyncio.create_subprocess_exec(
                        *CHATBRIDGE,
                        "run",
                        cwd=home,
                        env=clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}),
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.PIPE,
                    )
                )
            urls = [f"http://127.0.0.1:{p}/telegram/webhook" for p in ports]
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            try:
                async with aiohttp.ClientSession(headers=headers) as http:
                    await asyncio.gather(*(wait_ready(http, p) for p in ports))
                    counter = iter(range(10**9))

                    async def send(chat: int, text: str) -> float:
                        future = telegram.expect(chat, answer_to(text))
                        update = telegram.make_update(chat, chat, text)
                        url = urls[next(counter) % count]
                        sent = time.perf_counter()
                        async with http.post(url, json=update) as response:
                            assert response.status == 200, response.status
                        return await asyncio.wait_for(future, 60) - sent

                    # Warm-up: one message per replica (imports, SDK clients, Redis pools).
                    for n in range(count):
                        await send(CHAT0 + users + n, f"warm {n}")

                    async def user(c: int) -> list[float]:
                        return [await send(CHAT0 + c, f"c{c}m{m} Paket?") for m in range(messages)]

                    cpu0 = os.times()
                    t0 = time.perf_counter()
                    latencies = [
                        x for r in await asyncio.gather(*map(user, range(users))) for x in r
                    ]
                    elapsed = time.perf_counter() - t0
                    cpu1 = os.times()
            finally:
                for process in processes:
                    process.send_signal(signal.SIGTERM)
                codes = []
                for process in processes:
                    _, err = await asyncio.wait_for(process.communicate(), 30)
                    codes.append(process.returncode)
                    if process.returncode:
                        print(err.decode()[-2000:], file=sys.stderr)
        requests = len(openai.requests)
        deltas = sorted(r.deltas for r in openai.requests)
    flushdb()
    assert codes == [0] * count, codes
    total = users * messages
    return {
        "msgs": total,
        "rate": total / elapsed,
        "p50": pct(latencies, 0.5) * 1000,
        "p99": pct(latencies, 0.99) * 1000,
        "fakes_cpu": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        "requests": requests,
        "chunks": f"{deltas[0]}" if deltas[0] == deltas[-1] else f"{deltas[0]}-{deltas[-1]}",
    }


async def replicas_table(quick: bool) -> None:
    users, messages = (10, 3) if quick else (USERS, MESSAGES)
    print(
        f"\n{users} conversations x {messages} messages, round-robin over the replicas; "
        f"fake LLM chunks {CHUNK_DELAY * 1000:.0f} ms apart\n"
    )
    print(
        "| replicas | messages | messages/s | p50 ms | p99 ms | fakes+driver CPU s "
        "| chunks per answer (streamed) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for count in REPLICA_COUNTS:
        r = await run_replicas(count, users, messages)
        print(
            f"| {count} | {r['msgs']} | {r['rate']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} "
            f"| {r['fakes_cpu']:.1f} | {r['chunks']} |",
            flush=True,
        )


# -- the store ---------------------------------------------------------------


def populate_redis(users: int, prefix: str) -> None:
    """`bench_store.seed_rows` written into RedisStore's key layout, 1,000 users
    per pipeline round trip."""
    ring, sessions, usage = bench_store.seed_rows(users)
    by_user: dict[str, list[str]] = {}
    for entry in ring:
        by_user.setdefault(entry["user"], []).append(json.dumps(entry, ensure_ascii=False))
    day = bench_store.DAY
    with redis.Redis.from_url(REDIS_URL) as client:
        items = list(sessions.items())
        for start in range(0, len(items), 1000):
            pipe = client.pipeline(transaction=False)
            for key, s in items[start : start + 1000]:
                u = s["user"]
                pipe.rpush(f"{prefix}ring:{u}", *by_user[u])
                pipe.hset(
                    f"{prefix}session:{key}",
                    mapping={
                        "user": u,
                        "started_at": repr(float(s["started_at"])),
                        "last_active": repr(float(s["last_active"])),
                    },
                )
                turns = [json.dumps(t, ensure_ascii=False) for t in s["turns"]]
                pipe.rpush(f"{prefix}turns:{key}", *turns)
                pipe.sadd(f"{prefix}user-sessions:{u}", key)
                pipe.hset(f"{prefix}usage:{day}:{u}", mapping=usage[u][day])
                pipe.sadd(f"{prefix}user-days:{u}", day)
            pipe.execute()


async def measure_redis(users: int, samples: int, warmup: int = 200) -> dict[str, float | str]:
    """`bench_store.measure`'s loop over a RedisStore."""
    flushdb()
    prefix = "bench:"
    t0 = time.perf_counter()
    populate_redis(users, prefix)
    setup = time.perf_counter() - t0
    store = RedisStore(REDIS_URL, max_entries=bench_store.MAX_ENTRIES, prefix=prefix)
    await store.open()
    rng = random.Random(users)
    totals, commits, reads, cpu = [], [], [], []
    trips, counted = bench_store.count_round_trips(), [0, 0]  # commit, ring
    try:
        for n in range(warmup + samples):
            user = bench_store.user_id(rng.randrange(users))
            ex = bench_store.exchange(user, bench_store.NOW + n)
            before = trips[0]
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            await store.commit_exchange(ex)
            t2 = time.perf_counter_ns()
            middle = trips[0]
            context = await store.ring(user, since=bench_store.NOW - 3600)
            t3, c3 = time.perf_counter_ns(), time.thread_time_ns()
            assert context[-1].timestamp == bench_store.NOW + n
            if n >= warmup:
                counted[0] += middle - before
                counted[1] += trips[0] - middle
                totals.append((t3 - t1) / 1000)
                commits.append((t2 - t1) / 1000)
                reads.append((t3 - t2) / 1000)
                cpu.append((c3 - c1) / 1000)
    finally:
        await store.aclose()
        flushdb()
    trips_each = f"{counted[0] / samples:g} + {counted[1] / samples:g}"
    return {**bench_store.summary(setup, totals, commits, reads, cpu), "trips": trips_each}


async def store_table(quick: bool) -> None:
    print(
        "\n| backend | users | exchanges | mean µs | p50 µs | p99 µs "
        "| commit mean µs | ring mean µs | CPU mean µs | setup s | round trips (commit + ring) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    samples = 200 if quick else 2000
    for users in bench_store.USER_COUNTS:
        for backend in ("sqlite", "redis"):
            r: dict[str, Any]
            if backend == "sqlite":
                r = await bench_store.measure("sqlite", users, samples)
            else:
                r = await measure_redis(users, samples)
            print(
                f"| {backend} | {users:,} | {r['samples']} | {r['mean']:,.0f} | {r['p50']:,.0f} "
                f"| {r['p99']:,.0f} | {r['commit']:,.0f} | {r['ring']:,.0f} "
                f"| {r['cpu']:,.0f} | {r['setup_s']:.1f} | {r.get('trips', '–')} |",
                flush=True,
            )


async def main(quick: bool, skip_store: bool) -> None:
    with redis.Redis.from_url(REDIS_URL) as client:
        version = client.info("server")["redis_version"]
    print(
        f"calibration: sum(range(1000)) = {bench_store.calibration_us():.1f} µs; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; redis {version}"
    )
    await replicas_table(quick)
    if not skip_store:
        await store_table(quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and samples")
    parser.add_argument("--skip-store", action="store_true", help="only the replica table")
    args = parser.parse_args()
    # Replicas stopping mid-request make the fake servers log a reset connection.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(main(args.quick, args.skip_store))
