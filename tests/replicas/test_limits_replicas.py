"""Two `chatbridge run` replicas on one Redis share the limit counters.

One person writes in eight groups at once, the messages alternating between
the replicas' webhooks; each answer reports a fixed usage. Together the
replicas never admit more than the daily limit holds, and the counters in
Redis add up to exactly what the fake reported.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
import redis

from tests.replicas.test_run_replicas import Replica, wait_ready
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.redis_server import flush_allowed, redis_unavailable, redis_url
from tests.support.run_config import write_run_config
from tests.support.sse import Reply

pytestmark = pytest.mark.slow

DB = 9
SECRET = "s3cret-Limits"
GROUPS = [-1002000 - i for i in range(8)]
USED = (300, 200)  # what each answer reports: 500 tokens
LIMIT = 2000


@pytest.fixture
def redis_db() -> Iterator[None]:
    if reason := redis_unavailable():
        pytest.skip(reason)
    if not flush_allowed():
        pytest.skip("needs a Redis server of its own (unset CHATBRIDGE_TEST_REDIS_URL)")
    with redis.Redis.from_url(redis_url(DB)) as client:
        client.flushdb()
    yield
    with redis.Redis.from_url(redis_url(DB)) as client:
        client.flushdb()


def _config(home: Path, openai: FakeOpenAI, telegram: FakeTelegram, port: int) -> None:
    write_run_config(
        home,
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        webhook_secret=SECRET,
        allow=(ALICE, *GROUPS),
        memory={"backend": "redis", "url": redis_url(DB)},
        providers={
            "main": {"max_tokens": 500, "prices": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}
        },
        limits={"default": {"tokens_per_day": LIMIT}},
    )


def _answered(
    telegram: FakeTelegram, groups: list[int], wave: int, openai: FakeOpenAI | None = None
) -> Callable[[], bool]:
    """True once every group has an answer for `wave` (and, with `openai`, no stream is open)."""

    def done() -> bool:
        answered = all(len(telegram.bot_texts(g)) > wave for g in groups)
        return answered and (openai is None or openai.open_streams == 0)

    return done


async def _exit_of(process: asyncio.subprocess.Process) -> tuple[int | None, str]:
    """Its exit code and the tail of its stderr; a replica still running 30 s
    after SIGTERM is killed, and what it logged until then is the failure's text."""
    waiting = asyncio.ensure_future(process.communicate())
    done, _ = await asyncio.wait({waiting}, timeout=30)
    if not done:
        process.kill()
        _, err = await waiting
        return None, "still running 30 s after SIGTERM:\n" + err.decode()[-3000:]
    _, err = waiting.result()
    return process.returncode, err.decode()[-2000:]


async def test_two_replicas_never_pass_one_limit_together(tmp_path: Path, redis_db: None) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(*[Reply(usage=USED, first_chunk_delay=0.5)] * len(GROUPS) * 2)
        replicas = []
        for n in range(2):
            port, home = free_port(), tmp_path / f"replica{n}"
            home.mkdir()
            _config(home, openai, telegram, port)
            process = await asyncio.create_subprocess_exec(
                *CHATBRIDGE, "run", cwd=home, env=clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            replicas.append(Replica(process, port))
        try:
            async with aiohttp.ClientSession() as http:
                await asyncio.gather(*(wait_ready(http, r) for r in replicas))
            # Two waves: all at once, then once more each, one at a time.
            for wave in range(2):
                for i, group in enumerate(GROUPS):
                    text = f"@bridge_bot wave {wave} message {i}"
                    update = telegram.make_update(group, ALICE, text, chat_type="supergroup")
                    url = f"http://127.0.0.1:{replicas[i % 2].port}/telegram/webhook"
                    assert await telegram.post_webhook(url, update, secret=SECRET) == 200
                    if wave:
                        await telegram.wait_for(_answered(telegram, [group], wave), within=30)
                await telegram.wait_for(_answered(telegram, GROUPS, wave, openai), within=40)
            usage = await run_cli("usage", "--format", "json", cwd=tmp_path / "replica0", env={})
        finally:
            codes = []
            for replica in replicas:
                if replica.process.returncode is None:
                    replica.process.send_signal(signal.SIGTERM)
                codes.append(await _exit_of(replica.process))
    for code, tail in codes:
        assert code == 0, tail
    requests = len(openai.requests)
    assert 1 <= requests <= LIMIT // sum(USED), f"{requests} requests passed the limit"
    refusals = [t for g in GROUPS for t in telegram.bot_texts(g) if "Token-Limit" in t]
    assert len(refusals) == 2 * len(GROUPS) - requests
    assert usage.code == 0, usage.stderr
    (person,) = json.loads(usage.stdout)["people"]
    assert person["id"] == f"telegram:{ALICE}"
    assert (person["tokens_in"], person["tokens_out"]) == (USED[0] * requests, USED[1] * requests)
    assert person["requests"] == requests
    assert person["refused"] == len(refusals)
