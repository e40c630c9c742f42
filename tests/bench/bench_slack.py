"""Slack: events/s acked and answered through bolt + engine + openai SDK, and
ack latency, Socket Mode and HTTP Events side by side.

Run: `python3 -m tests.bench.bench_slack [--users 20] [--messages 10]`.

The real stack, in-process on one event loop, once per mode: `FakeSlack`
(Socket Mode envelopes, or signed HTTP POSTs) -> slack-bolt `AsyncApp`
(`process_before_response=True`) -> `SlackPlatform` -> `Engine` (SQLite in a
temp dir) -> `OpenAIProvider` (openai SDK) -> `FakeOpenAI`, and the answer out
through `SlackOutbox` (`chat.postMessage` / `chat.update`). Both stacks run in
the same process and the modes take turns: round n sends every user's n-th
message in one mode, then in the other (which mode goes first alternates), so
both meet the same machine. In a round every user sends one message and
waits until its answer is shown.

Ack latency is measured over an open connection in both modes: the Socket
Mode websocket, and for HTTP a keep-alive session that the first (warm-up)
round opened, so neither figure holds a TCP connect. It runs from the envelope
or POST leaving the fake to the ack or 200, which follows the inbox write.
Answered = the fake shows the LLM's full reply. Nothing leaves 127.0.0.1;
fakes and bots share one loop and one GIL (pessimistic).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web

from chatbridge.config import SlackConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.app.webhooks import mount
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.platforms.slack import EVENTS_PATH, SlackPlatform
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.stores.sqlite import SqliteStore
from tests.support import fake_slack_events as ev
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack

SECRET = "bench-secret"
REPLY = "Das Chemitek-Paket kommt am Mittwoch, 09.04., mit UPS."
MODES = ("socket", "http")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Stack:
    """One mode's bot: its platform, engine and store, and what it measured."""

    mode: str
    users: list[str]
    url: str = ""
    acks: list[float] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)
    seconds: float = 0.0  # time spent in this mode's rounds


@contextlib.asynccontextmanager
async def _stack(
    mode: str, slack: FakeSlack, llm: FakeOpenAI, home: Path, users: int
) -> AsyncIterator[Stack]:
    store = SqliteStore(home / f"{mode}.db", max_entries=20)
    await store.open()
    provider = OpenAIProvider(
        "main", model="gpt-bench", api_key="sk-bench", base_url=llm.base_url,
        timeout=30.0, max_retries=0, max_tokens=512,
    )  # fmt: skip
    prefix = "U0S" if mode == "socket" else "U0H"  # each mode its own users and DMs
    ids = [f"{prefix}{i:04d}" for i in range(users)]
    engine = Engine(
        EngineSettings(language="de"), store=store, provider=provider,
        access=AccessPolicy(allow=tuple(f"slack:{u}" for u in ids)),
    )  # fmt: skip
    values = {"enabled": True, "bot_token": BOT_TOKEN, "base_url": slack.base_url,
              "edit_interval": 0.2}  # fmt: skip
    values |= {"app_token": APP_TOKEN} if mode == "socket" else {"signing_secret": SECRET}
    server = web.Application()
    platform = SlackPlatform(config=SlackConfig.model_validate(values), handler=engine)
    mount(server, platform.routes)
    runner = web.AppRunner(server, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    engine.attach(platform.name, platform.outbox)
    await platform.start()
    try:
        yield Stack(mode, ids, f"http://127.0.0.1:{runner.addresses[0][1]}{EVENTS_PATH}")
    finally:
        await platform.aclose()
        await engine.drain(5.0)
        await runner.cleanup()
        await store.aclose()
        await provider.aclose()


async def _round(
    stack: Stack, slack: FakeSlack, http: aiohttp.ClientSession, n: int, *, record: bool
) -> None:
    async def one(user_id: str) -> None:
        channel = "D" + user_id[1:]
        event = ev.dm_message(f"Frage {n}", user=user_id, channel=channel)
        started = time.monotonic()
        if stack.mode == "socket":
            delivery = await slack.socket_event(event, within=30)
            ack = delivery.latency or 0.0
        else:
            status, _, ack = await slack.post_event(
                stack.url, event, signing_secret=SECRET, session=http
            )
            assert status == 200, status
        await slack.wait_for(lambda: slack.bot_texts(channel).count(REPLY) >= n + 1, 60)
        if record:
            stack.acks.append(ack)
            stack.answers.append(time.monotonic() - started)

    began = time.monotonic()
    await asyncio.gather(*(one(u) for u in stack.users))
    if record:
        stack.seconds += time.monotonic() - began


async def bench(users: int, messages: int) -> list[Stack]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            FakeSlack() as slack,
            FakeOpenAI(default_text=REPLY, chunk_chars=16) as llm,
            _stack("socket", slack, llm, Path(tmp), users) as socket_mode,
            _stack("http", slack, llm, Path(tmp), users) as http_mode,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
        ):
            stacks = [socket_mode, http_mode]
            for stack in stacks:  # warm-up round: imports, SDK clients, HTTP keep-alive
                await _round(stack, slack, http, 0, record=False)
            for n in range(1, messages + 1):
                for stack in stacks if n % 2 else reversed(stacks):
                    await _round(stack, slack, http, n, record=True)
    return stacks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10)
    args = parser.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"{args.users} users x {args.messages} messages per mode, rounds alternating\n"
    )
    print("| mode | events | events/s acked and answered | ack p50 ms | ack p99 ms "
          "| answered p50 ms | answered p99 ms |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in asyncio.run(bench(args.users, args.messages)):
        print(
            f"| {s.mode} | {len(s.acks)} | {len(s.acks) / s.seconds:.1f} "
            f"| {_pct(s.acks, 0.5) * 1000:.1f} | {_pct(s.acks, 0.99) * 1000:.1f} "
            f"| {statistics.median(s.answers) * 1000:.0f} | {_pct(s.answers, 0.99) * 1000:.0f} |"
        )


if __name__ == "__main__":
    main()
