"""How much latency the provider layer adds on top of the server's own time.

Run: `python3 -m tests.bench.bench_providers [--requests 300] [--deltas 100]`.

Each request streams one answer from a fake server (running on its own event
loop in a thread, so its timing isn't interleaved with the client's). For each
request: added = (call to last event, measured by the client) - (handler entry
to last byte written, measured by the fake). Rows for the bare SDK, run turn
about with ours, show how much of that is the SDK's and how much is ours. Both
loops share one GIL, so absolute numbers are pessimistic. All on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import openai

from chatbridge.core.models import Turn
from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.base import Prompt, Provider
from chatbridge.providers.openai import OpenAIProvider
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import FakeSSEServer

PROMPT = Prompt(system="You are a benchmark.", messages=(Turn("user", "Say something long."),))
WARMUP = 20
Call = Callable[[], Awaitable[None]]


class ServerThread:
    """A fake server running on its own event loop in a daemon thread."""

    def __init__(self, fake: FakeSSEServer) -> None:
        self.fake = fake
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeSSEServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.__aenter__(), self._loop).result(10)
        return self.fake

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.__aexit__(None, None, None), self._loop).result(
            10
        )
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def via_provider(provider: Provider) -> Call:
    async def call() -> None:
        async for _ in provider.stream(PROMPT):
            pass

    return call


def via_openai_sdk(client: openai.AsyncOpenAI) -> Call:
    async def call() -> None:
        messages: Any = [{"role": "system", "content": PROMPT.system}]
        messages += [{"role": t.role, "content": t.content} for t in PROMPT.messages]
        stream = await client.chat.completions.create(
            model="bench", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        async for _ in stream:
            pass

    return call


def via_anthropic_sdk(client: anthropic.AsyncAnthropic) -> Call:
    async def call() -> None:
        messages: Any = [{"role": t.role, "content": t.content} for t in PROMPT.messages]
        stream = await client.messages.create(
            model="bench", max_tokens=1024, system=PROMPT.system, messages=messages, stream=True
        )
        async for _ in stream:
            pass

    return call


async def measure(
    fake: FakeSSEServer, calls: dict[str, Call], requests: int
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Per label: (end-to-end, fake's own, added) seconds per request.

    The calls take turns request by request, so a busy machine skews all of
    them alike instead of whichever happened to run during the noise.
    """
    for call in calls.values():
        for _ in range(WARMUP):
            await call()
    results: dict[str, tuple[list[float], list[float], list[float]]] = {
        label: ([], [], []) for label in calls
    }
    for _ in range(requests):
        for label, call in calls.items():
            totals, server, added = results[label]
            started = time.perf_counter()
            await call()
            totals.append(time.perf_counter() - started)
            server.append(fake.requests[-1].server_seconds)
            added.append(totals[-1] - server[-1])
    return results


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


def clients(kind: str, base_url: str) -> tuple[Any, Provider, Call]:
    """(bare SDK client, our provider, a call through the bare SDK) for `kind`."""
    settings: dict[str, Any] = {"api_key": "bench", "base_url": base_url, "max_retries": 0}
    limits: dict[str, Any] = {"model": "bench", "timeout": 30.0, "max_tokens": 1024}
    if kind == "openai":
        sdk = openai.AsyncOpenAI(**settings, timeout=30)
        return sdk, OpenAIProvider(kind, **settings, **limits), via_openai_sdk(sdk)
    sdk_a = anthropic.AsyncAnthropic(**settings, timeout=30)
    return sdk_a, AnthropicProvider(kind, **settings, **limits), via_anthropic_sdk(sdk_a)


async def run(requests: int, deltas: int) -> list[str]:
    text = "lorem ipsum " * (deltas // 2)  # 12 chars per word pair: 6-char deltas
    rows = []
    for kind in ("openai", "anthropic"):
        cls = FakeOpenAI if kind == "openai" else FakeAnthropic
        with ServerThread(cls(default_text=text, chunk_chars=6)) as fake:
            sdk, ours, bare = clients(kind, fake.base_url)
            calls = {"SDK alone": bare, "provider": via_provider(ours)}
            measured = await measure(fake, calls, requests)
            for label, (totals, server, added) in measured.items():
                rows.append(
                    f"| {kind} {label} | {requests} | {deltas} "
                    f"| {statistics.median(totals) * 1000:.2f} "
                    f"| {statistics.median(server) * 1000:.2f} "
                    f"| {percentile(added, 50):.2f} | {percentile(added, 99):.2f} |"
                )
            await sdk.close()
            await ours.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--deltas", type=int, default=100, help="text deltas per answer")
    args = parser.parse_args()
    rows = asyncio.run(run(args.requests, args.deltas))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    print("| path | requests | deltas | p50 total ms | p50 fake ms | p50 added ms | p99 added ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
