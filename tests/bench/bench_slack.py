"""Events/s acked and answered through bolt + engine + openai SDK, and ack latency.

Run: `python3 -m tests.bench.bench_slack [--users 20] [--messages 10] [--mode socket|http]`.

The real stack, in-process on one event loop: `FakeSlack` (Socket Mode
envelopes, or signed HTTP POSTs) -> slack-bolt `AsyncApp`
(`process_before_response=True`) -> `SlackPlatform` -> `Engine` (SQLite in a
temp dir) -> `OpenAIProvider` (openai SDK) -> `FakeOpenAI`, and the answer out
through `SlackOutbox` (`chat.postMessage` / `chat.update`). Every user has a
DM of their own and sends the next message only once the previous answer is
shown. Ack latency = envelope sent -> ack received (includes the inbox write:
the ack follows it); answered = the fake shows the LLM's full reply. Nothing
leaves 127.0.0.1; fakes and bot share one loop and one GIL (pessimistic).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp import web

from chatbridge.config import SlackConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.store import SqliteStore
from chatbridge.platforms.slack import EVENTS_PATH, SlackPlatform
from chatbridge.providers.openai import OpenAIProvider
from tests.support import fake_slack_events as ev
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack

SECRET = "bench-secret"
REPLY = "Das Chemitek-Paket kommt am Mittwoch, 09.04., mit UPS."


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench(users: int, messages: int, mode: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeSlack() as slack, FakeOpenAI(default_text=REPLY, chunk_chars=16) as llm:
            store = SqliteStore(Path(tmp) / "bench.db", max_entries=20)
            await store.open()
            provider = OpenAIProvider(
                "main", model="gpt-bench", api_key="sk-bench", base_url=llm.base_url,
                timeout=30.0, max_retries=0, max_tokens=512,
            )  # fmt: skip
            ids = [f"U0B{i:04d}" for i in range(users)]
            engine = Engine(
                EngineSettings(language="de"), store=store, provider=provider,
                access=AccessPolicy(allow=tuple(f"slack:{u}" for u in ids)),
            )  # fmt: skip
            values = {"enabled": True, "bot_token": BOT_TOKEN, "base_url": slack.base_url,
                      "edit_interval": 0.2}  # fmt: skip
            values |= {"app_token": APP_TOKEN} if mode == "socket" else {"signing_secret": SECRET}
            server = web.Application()
            platform = SlackPlatform(
                config=SlackConfig.model_validate(values), handler=engine, server=server
            )
            runner = web.AppRunner(server, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            url = f"http://127.0.0.1:{runner.addresses[0][1]}{EVENTS_PATH}"
            engine.attach(platform.name, platform.outbox)
            await platform.start()
            acks: list[float] = []
            answers: list[float] = []

            async def user(user_id: str) -> None:
                channel = "D" + user_id[1:]
                for n in range(messages):
                    event = ev.dm_message(f"Frage {n}", user=user_id, channel=channel)
                    started = time.monotonic()
                    if mode == "socket":
                        delivery = await slack.socket_event(event, within=10)
                        acks.append(delivery.latency or 0.0)
                    else:
                        status, _, latency = await slack.post_event(
                            url, event, signing_secret=SECRET
                        )
                        assert status == 200
                        acks.append(latency)
                    await slack.wait_for(
                        lambda c=channel, k=n + 1: slack.bot_texts(c).count(REPLY) >= k, 30
                    )
                    answers.append(time.monotonic() - started)

            began = time.monotonic()
            await asyncio.gather(*(user(u) for u in ids))
            elapsed = time.monotonic() - began
            await platform.aclose()
            await engine.drain(5.0)
            await runner.cleanup()
            await store.aclose()
            await provider.aclose()
    total = users * messages
    return {
        "events": total, "seconds": elapsed, "events_per_s": total / elapsed,
        "ack_p50_ms": _pct(acks, 0.5) * 1000, "ack_p99_ms": _pct(acks, 0.99) * 1000,
        "answer_p50_ms": statistics.median(answers) * 1000,
        "answer_p99_ms": _pct(answers, 0.99) * 1000,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--mode", choices=["socket", "http", "both"], default="both")
    args = parser.parse_args()
    for mode in ["socket", "http"] if args.mode == "both" else [args.mode]:
        r = asyncio.run(bench(args.users, args.messages, mode))
        print(
            f"slack {mode:6}: {r['events']:.0f} events in {r['seconds']:.2f}s = "
            f"{r['events_per_s']:.1f} events/s acked+answered; ack p50 {r['ack_p50_ms']:.1f} ms "
            f"p99 {r['ack_p99_ms']:.1f} ms; answered p50 {r['answer_p50_ms']:.0f} ms "
            f"p99 {r['answer_p99_ms']:.0f} ms"
        )


if __name__ == "__main__":
    main()
