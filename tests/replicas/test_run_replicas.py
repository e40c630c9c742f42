"""Three `chatbridge run` processes on one Redis behave as one Telegram bot.

Each replica is a real `chatbridge run` child with its own `server.port` and
Telegram in webhook mode (its own webhook URL, one shared secret), the Redis
store on the test run's own server (`tests.support.redis_server`; the config
has no key-prefix setting, so the test takes Redis DB `DB` of that server and
FLUSHDBs it before and after, or skips where the server is not its own), and one
`FakeOpenAI` whose answers quote the user's text, so the Nth answer in the chat
shows which message it answers. A sampler watches the fake's open streams:
one conversation must never stream twice at once.

Lease ttl: `engine.lease_ttl` is set to `TTL` so a killed replica blocks
the conversation only briefly.

Messages are POSTed 50 ms apart, each once the previous one's POST was
acknowledged (as Telegram does: an update is in the inbox once acknowledged).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import redis

from chatbridge.core.models import InboxEntry
from chatbridge.stores.redis import RedisStore
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.redis_server import flush_allowed, redis_unavailable, redis_url
from tests.support.run_config import write_run_config
from tests.support.sse import Body, Reply

pytestmark = pytest.mark.slow

DB = 7
SECRET = "s3cret-Replica"
TTL = 2.0
# s; hang detectors only (never a measure of speed): after the kill, a machine
# at load 12 on 2 cores took over 15 s to show m7 and m8.
DEADLINE = 60.0


def answer_to(text: str) -> str:
    # "lang" asks for a slow answer (~2.5 s), long enough to kill its replica mid-stream.
    tail = " und weiter" * 24 if "lang" in text else " fertig"
    return f"Antwort auf «{text}»:{tail}."


def _reply(body: Body) -> str:
    return answer_to(str(body["messages"][-1]["content"]))


def _history(body: Body) -> list[tuple[str, str]]:
    """The (role, content) turns a request carried, the system prompt left out."""
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def _exchanges(texts: list[str]) -> list[tuple[str, str]]:
    """What a request for the next message must carry before it: each earlier
    message and its whole answer, in order."""
    return [turn for t in texts for turn in (("user", t), ("assistant", answer_to(t)))]


def config(
    home: Path, openai: FakeOpenAI, telegram: FakeTelegram, port: int, key: str = "sk-test"
) -> None:
    write_run_config(
        home,
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        webhook_secret=SECRET,
        engine={"shutdown_grace": "10s", "lease_ttl": f"{TTL}s"},
        memory={"backend": "redis", "url": redis_url(DB), "inject_entries": 0},
        providers={"main": {"api_key": key}},
        # drafts off, edits: a half-streamed answer is a message another replica must finish
        platforms={"telegram": {"edit_interval": "0.5s", "drafts": False}},
    )


@dataclass
class Replica:
    process: asyncio.subprocess.Process
    port: int

    @property
    def webhook(self) -> str:
        return f"http://127.0.0.1:{self.port}/telegram/webhook"


def flushdb() -> None:
    with redis.Redis.from_url(redis_url(DB)) as client:
        client.flushdb()


@pytest.fixture
def redis_db() -> Iterator[None]:
    reason = redis_unavailable()
    if reason:
        pytest.skip(reason)
    if not flush_allowed():
        pytest.skip("needs a Redis server of its own (unset CHATBRIDGE_TEST_REDIS_URL)")
    flushdb()
    yield
    flushdb()


def key_of(n: int) -> str:
    return f"sk-replica-{n}"


async def start_replica(root: Path, n: int, openai: FakeOpenAI, telegram: FakeTelegram) -> Replica:
    port = free_port()
    home = root / f"replica{n}"
    home.mkdir()
    # Its own API key: the fake's request headers tell which replica asked.
    config(home, openai, telegram, port, key_of(n))
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=home,
        env=clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return Replica(process, port)


async def wait_ready(http: aiohttp.ClientSession, replica: Replica, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while True:
        if replica.process.returncode is not None:
            _, err = await replica.process.communicate()
            raise AssertionError(f"replica exited {replica.process.returncode}: {err.decode()}")
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(f"http://127.0.0.1:{replica.port}/readyz") as response:
                if response.status == 200:
                    return
        if time.monotonic() > deadline:
            raise AssertionError(f"replica on port {replica.port} not ready in {within} s")
        await asyncio.sleep(0.1)


async def pending() -> list[InboxEntry]:
    """The inbox entries the replicas share that are not answered yet."""
    store = RedisStore(redis_url(DB), max_entries=100)
    await store.open()
    try:
        return await store.inbox_pending()
    finally:
        await store.aclose()


async def until_inbox(check: object, within: float = DEADLINE) -> None:
    """Until `check(pending entries)` holds (an empty inbox: nothing more can be posted)."""
    deadline = time.monotonic() + within
    while not check(await pending()):  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"the inbox never got there: {await pending()}")
        await asyncio.sleep(0.05)


class StreamSampler:
    """Largest `open_streams` seen, sampled every 5 ms."""

    def __init__(self, openai: FakeOpenAI) -> None:
        self.openai, self.peak, self.samples = openai, 0, 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.openai.open_streams)
            self.samples += 1
            await asyncio.sleep(0.005)

    def __enter__(self) -> StreamSampler:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.mark.timeout(300)  # three children on a busy machine; the deadlines above
async def test_three_run_replicas_answer_one_chat_in_order_and_survive_a_kill(
    tmp_path: Path, redis_db: None
) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        reply = Reply(text=_reply, chunk_chars=6, chunk_delay=0.05)
        # m7's first stream (request 7) is slow enough that the kill always
        # lands in it, however loaded the machine (~20 s); every other is ~2.5 s.
        cut_short = Reply(text=_reply, chunk_chars=6, chunk_delay=0.5)
        openai.script(*[reply] * 6, cut_short, *[reply] * 33)
        replicas = [await start_replica(tmp_path, n, openai, telegram) for n in range(3)]
        try:
            async with aiohttp.ClientSession() as http:
                await asyncio.gather(*(wait_ready(http, r) for r in replicas))
            with StreamSampler(openai) as sampler:
                # Phase 1: six messages round-robin, posted 50 ms apart.
                texts = [f"m{i} Wo bleibt Paket {i}?" for i in range(1, 7)]
                for i, text in enumerate(texts):
                    update = telegram.make_update(ALICE, ALICE, text)
                    url = replicas[i % 3].webhook
                    assert await telegram.post_webhook(url, update, secret=SECRET) == 200
                    await asyncio.sleep(0.05)
                expected = [answer_to(t) for t in texts]
                await telegram.wait_for(
                    lambda: len(telegram.bot_texts(ALICE)) >= 6, within=DEADLINE
                )
                await until_inbox(lambda entries: not entries)  # nothing more can be posted
                assert telegram.bot_texts(ALICE) == expected, "not each answered once, in order"
                assert [r.body["messages"][-1]["content"] for r in openai.requests] == texts
                for n, request in enumerate(openai.requests):  # exactly the earlier exchanges
                    assert _history(request.body) == [*_exchanges(texts[:n]), ("user", texts[n])]

                # Phase 2: kill the replica streaming m7, post m8 to another one.
                # m7 goes to replica 0's webhook, but whichever replica holds the
                # lease answers it (a driver still looking after m6 may): the
                # victim is the one whose key asked for it.
                slow = "m7 lang: Status der Sendung?"
                update = telegram.make_update(ALICE, ALICE, slow)
                assert (
                    await telegram.post_webhook(replicas[0].webhook, update, secret=SECRET) == 200
                )
                # Its first part is on screen (and its message id in the inbox entry).
                await telegram.wait_for(
                    lambda: len(telegram.bot_texts(ALICE)) == 7 and openai.open_streams == 1,
                    within=DEADLINE,
                )
                await until_inbox(lambda entries: any(e.sent for e in entries))  # recorded
                asker = openai.requests[len(texts)].headers["authorization"]
                victim = next(r for n, r in enumerate(replicas) if asker == f"Bearer {key_of(n)}")
                survivor = next(r for r in replicas if r is not victim)
                partial = telegram.bot_texts(ALICE)[-1]
                assert partial != answer_to(slow), "m7 finished before the kill"
                victim.process.send_signal(signal.SIGKILL)
                await victim.process.wait()
                killed_at = time.monotonic()
                after = "m8 Danke!"
                update = telegram.make_update(ALICE, ALICE, after)
                assert await telegram.post_webhook(survivor.webhook, update, secret=SECRET) == 200
                expected += [answer_to(slow), answer_to(after)]
                await telegram.wait_for(
                    lambda: telegram.bot_texts(ALICE) == expected, within=DEADLINE
                )
                recovered = time.monotonic() - killed_at
                await until_inbox(lambda entries: not entries)
                assert telegram.bot_texts(ALICE) == expected
            assert sampler.samples > 100
            assert sampler.peak <= 1, "two streams for one conversation at once"
            # m7 streamed twice (cut by the kill, then again by a survivor), m8 once.
            asked = [r.body["messages"][-1]["content"] for r in openai.requests]
            assert asked == [*texts, slow, slow, after]
            last = openai.requests[-1].body
            assert _history(last) == [*_exchanges([*texts, slow]), ("user", after)]
            # Lease expiry (ttl), then m7 again (~2.5 s) before m8: printed, not
            # asserted (issue 15's ttl + 5 s on a quiet machine; a busy one took 7.3 s).
            print(
                f"m7 posted to replica 0, streamed by replica {replicas.index(victim)}; "
                f"m8 answered {recovered:.1f} s after SIGKILL (lease ttl {TTL} s)"
            )
        finally:
            for replica in replicas:
                if replica.process.returncode is None:
                    replica.process.send_signal(signal.SIGTERM)
            codes = []
            for replica in replicas:
                _, stderr = await asyncio.wait_for(replica.process.communicate(), 20)
                codes.append((replica.process.returncode, stderr.decode()[-2000:]))
    killed = replicas.index(victim)
    assert codes[killed][0] == -signal.SIGKILL
    for code, tail in codes[:killed] + codes[killed + 1 :]:
        assert code == 0, tail
