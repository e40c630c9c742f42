"""Start-up time: `chatbridge run` from process start to its first Telegram
poll, to its first answer (provider SDK import included), and to its first
Discord IDENTIFY.

    python -m tests.bench.bench_startup [runs]

Runs the real console entry point (`python -m chatbridge run`) against the
fake Bot API and the fake OpenAI, with one message already waiting in
Telegram when the process starts. Two figures per run: until the fake saw
the first `getUpdates` (the bot is receiving), and until that message's
answer is in the chat — for `openai` that includes importing the openai SDK
(deferred until the platforms are up, or until the first request needs it)
and the request itself; `debug` imports no SDK. Runs of the two providers
alternate, so both meet the same machine. Also prints which heavy modules
importing the engine loads. A Discord-only run (fake REST + gateway, openai
provider) is timed from process start to the gateway's IDENTIFY, and lists
the heavy modules a Telegram-only run had imported by its first poll.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_discord import TOKEN, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

USER = 579304651
CONFIG = """
platforms:
  telegram: {{enabled: true, token: "{token}", base_url: "{base_url}"}}
memory: {{path: "{db}"}}
server: {{port: {port}}}
access: {{allow: [telegram:{user}]}}
providers:
  main: {provider}
"""
PROVIDERS = {
    "debug": "{{type: debug}}",
    "openai": '{{type: openai, model: gpt-test, api_key: sk-test, base_url: "{openai}"}}',
}


async def one_run(
    telegram: FakeTelegram, openai: FakeOpenAI, workdir: Path, provider: str, n: int
) -> tuple[float, float]:
    config = workdir / f"chatbridge-{provider}-{n}.yaml"
    config.write_text(
        CONFIG.format(
            token=telegram.token, base_url=telegram.base_url, db=workdir / f"s{n}-{provider}.db",
            port=free_port(), user=USER,
            provider=PROVIDERS[provider].format(openai=openai.base_url),
        )
    )  # fmt: skip
    chat = USER + n + (0 if provider == "debug" else 10_000)  # a fresh chat each run
    telegram.push_text(chat, USER, f"Wo ist das Paket {n}?")
    polls = len(telegram.calls_to("getUpdates"))
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", "--config", str(config), env=clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    await telegram.wait_for(lambda: len(telegram.calls_to("getUpdates")) > polls, within=60)
    polled = time.perf_counter() - started
    await telegram.wait_for(lambda: bool(telegram.bot_texts(chat)), within=60)
    answered = time.perf_counter() - started
    process.terminate()
    await process.wait()
    return polled, answered


DISCORD_CONFIG = """
platforms:
  discord: {{enabled: true, token: "{token}", api_base: "{api}", gateway_url: "{gateway}"}}
memory: {{path: "{db}"}}
server: {{port: {port}}}
providers:
  main: {{type: openai, model: gpt-test, api_key: sk-test, base_url: "http://127.0.0.1:9/v1"}}
"""
HEAVY = {
    "redis", "telegram", "discord", "slack_bolt", "slack_sdk", "openai", "anthropic",
    "aiohttp", "prometheus_client", "telegramify_markdown", "markdown_to_mrkdwn", "httpx",
}  # fmt: skip


async def discord_run(discord: FakeDiscord, workdir: Path, n: int) -> float:
    """Process start -> the fake gateway's IDENTIFY."""
    config = workdir / f"discord-{n}.yaml"
    config.write_text(
        DISCORD_CONFIG.format(
            token=TOKEN, api=discord.api_base, gateway=discord.gateway_url,
            db=workdir / f"d{n}.db", port=free_port(),
        )
    )  # fmt: skip
    identified = discord.identify_count
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", "--config", str(config), env=clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    await discord.wait_for(lambda: discord.identify_count > identified, within=60)
    elapsed = time.perf_counter() - started
    process.terminate()
    await process.wait()
    return elapsed


async def imports_at_first_poll(telegram: FakeTelegram, workdir: Path) -> list[str]:
    """The heavy packages a Telegram-only run (openai provider) had imported
    when its first getUpdates arrived (`-X importtime`, killed right then)."""
    config = workdir / "imports.yaml"
    config.write_text(
        CONFIG.format(
            token=telegram.token, base_url=telegram.base_url, db=workdir / "imports.db",
            port=free_port(), user=USER,
            provider=PROVIDERS["openai"].format(openai="http://127.0.0.1:9/v1"),
        )
    )  # fmt: skip
    polls = len(telegram.calls_to("getUpdates"))
    log = workdir / "importtime.txt"
    with log.open("w") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-X", "importtime", "-m", "chatbridge", "run", "--config",
            str(config), env=clean_env(), stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        await telegram.wait_for(lambda: len(telegram.calls_to("getUpdates")) > polls, within=60)
        process.kill()
        await process.wait()
    names = {
        line.split("|")[-1].strip().split(".")[0]
        for line in log.read_text().splitlines()
        if line.startswith("import time:")
    }
    return sorted(names & HEAVY)


def engine_imports() -> list[str]:
    code = (
        "import sys, chatbridge.core.engine; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'redis','telegram','discord','slack_bolt','slack_sdk','openai','anthropic','yaml','pydantic'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


async def main(runs: int) -> None:
    times: dict[str, list[tuple[float, float]]] = {p: [] for p in PROVIDERS}
    identify: list[float] = []
    async with (
        FakeTelegram() as telegram,
        FakeOpenAI(default_text="Mittwoch.") as openai,
        FakeDiscord() as discord,
    ):
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(runs):
                for provider in PROVIDERS if n % 2 == 0 else reversed(PROVIDERS):
                    times[provider].append(await one_run(telegram, openai, Path(tmp), provider, n))
                identify.append(await discord_run(discord, Path(tmp), n))
            at_poll = await imports_at_first_poll(telegram, Path(tmp))
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {runs} runs per "
        "provider, alternating; median (min–max)\n"
    )
    print("| provider | process start -> first getUpdates | -> first answer in the chat |")
    print("|---|---:|---:|")
    for provider, pairs in times.items():
        polled, answered = [p for p, _ in pairs], [a for _, a in pairs]
        print(f"| {provider} | {_summary(polled)} | {_summary(answered)} |")
    print(f"| discord (openai) | process start -> IDENTIFY: {_summary(identify)} | |")
    print(f"\nheavy modules loaded by importing the engine: {engine_imports() or 'none'}")
    print(f"heavy packages imported by a Telegram-only run at its first poll: {at_poll}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
