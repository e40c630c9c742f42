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

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_discord import TOKEN, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.paths import REPO
from tests.support.people import ALICE

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


class WatchedTelegram(FakeTelegram):
    """The fake Bot API, noting the moment and the watched process's CPU time
    as its first getUpdates arrives (not some polling interval later)."""

    def __init__(self) -> None:
        super().__init__()
        self.watch: int | None = None
        self.seen: tuple[float, float] | None = None

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.watch is not None and self.seen is None:
            self.seen = (time.perf_counter(), cpu_seconds(self.watch))
        return await super()._api_getUpdates(params)


class WatchedDiscord(FakeDiscord):
    """The fake Discord, noting the same as IDENTIFY arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.watch: int | None = None
        self.seen: tuple[float, float] | None = None

    async def _identify(self, conn: Any, data: dict[str, Any]) -> None:
        if self.watch is not None and self.seen is None:
            self.seen = (time.perf_counter(), cpu_seconds(self.watch))
        await super()._identify(conn, data)


async def one_run(
    telegram: WatchedTelegram,
    openai: FakeOpenAI,
    workdir: Path,
    provider: str,
    n: int,
    env: dict[str, str],
) -> tuple[float, float, float]:
    config = workdir / f"chatbridge-{provider}-{n}.yaml"
    config.write_text(
        CONFIG.format(
            token=telegram.token, base_url=telegram.base_url, db=workdir / f"s{n}-{provider}.db",
            port=free_port(), user=ALICE,
            provider=PROVIDERS[provider].format(openai=openai.base_url),
        )
    )  # fmt: skip
    chat = ALICE + n + (0 if provider == "debug" else 10_000)  # a fresh chat each run
    telegram.push_text(chat, ALICE, f"Wo ist das Paket {n}?")
    telegram.seen = None
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", "--config", str(config), env=env, cwd=workdir,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    telegram.watch = process.pid
    await telegram.wait_for(lambda: telegram.seen is not None, within=60)
    assert telegram.seen is not None
    polled, cpu = telegram.seen[0] - started, telegram.seen[1]
    await telegram.wait_for(lambda: bool(telegram.bot_texts(chat)), within=60)
    answered = time.perf_counter() - started
    process.terminate()
    await process.wait()
    return polled, answered, cpu


DISCORD_CONFIG = """
platforms:
  discord: {{enabled: true, token: "{token}", api_base: "{api}", gateway_url: "{gateway}"}}
memory: {{path: "{db}"}}
server: {{port: {port}}}
providers:
  main: {{type: openai, model: gpt-test, api_key: sk-test, base_url: "http://127.0.0.1:9/v1"}}
"""
HEAVY = {
    "yaml", "pydantic",
    "redis", "telegram", "discord", "slack_bolt", "slack_sdk", "openai", "anthropic",
    "aiohttp", "prometheus_client", "telegramify_markdown", "markdown_to_mrkdwn", "httpx",
}  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far: what start-up
    costs, unlike wall time, barely moves with other load on the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def discord_run(
    discord: WatchedDiscord, workdir: Path, n: int, env: dict[str, str]
) -> tuple[float, float]:
    """Process start -> the fake gateway's IDENTIFY."""
    config = workdir / f"discord-{n}.yaml"
    config.write_text(
        DISCORD_CONFIG.format(
            token=TOKEN, api=discord.api_base, gateway=discord.gateway_url,
            db=workdir / f"d{n}.db", port=free_port(),
        )
    )  # fmt: skip
    discord.seen = None
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", "--config", str(config), env=env, cwd=workdir,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    discord.watch = process.pid
    await discord.wait_for(lambda: discord.seen is not None, within=60)
    assert discord.seen is not None
    elapsed, cpu = discord.seen[0] - started, discord.seen[1]
    process.terminate()
    await process.wait()
    return elapsed, cpu


async def imports_at_first_poll(workdir: Path, env: dict[str, str], tag: int) -> list[str]:
    """The heavy packages a Telegram-only run (openai provider) imports before
    its first poll: `-X importtime`, with the fake refusing deleteWebhook (the
    last call before polling), so the run stops exactly there."""
    async with FakeTelegram() as telegram:
        telegram.forget_method("deleteWebhook")
        config = workdir / f"imports{tag}.yaml"
        config.write_text(
            CONFIG.format(
                token=telegram.token, base_url=telegram.base_url,
                db=workdir / f"imports{tag}.db", port=free_port(), user=ALICE,
                provider=PROVIDERS["openai"].format(openai="http://127.0.0.1:9/v1"),
            )
        )  # fmt: skip
        log = workdir / f"importtime{tag}.txt"
        with log.open("w") as err:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-X", "importtime", "-m", "chatbridge", "run", "--config",
                str(config), env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
            await asyncio.wait_for(process.wait(), 60)
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


def before_tree(revision: str, root: Path) -> dict[str, str]:
    """A child environment running `revision` of this repository: its tree
    extracted under `root`, laid out as the `chatbridge` package, first on
    PYTHONPATH (ahead of the installed editable one)."""
    source = root / "source"
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    package = root / "path" / "chatbridge"
    package.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (package / name).write_bytes((source / "chatbridge" / name).read_bytes())
    for part in ("core", "platforms", "providers", "config"):
        (package / part).symlink_to(source / part)
    env = clean_env()
    site, *rest = env["PYTHONPATH"].split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join([site, str(root / "path"), *rest])
    return env


async def main(runs: int, before: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"now": clean_env()}
        if before:
            trees[f"before ({before})"] = before_tree(before, Path(tmp) / "before")
        times: dict[tuple[str, str], list[tuple[float, float, float]]] = {
            (t, p): [] for t in trees for p in PROVIDERS
        }
        identify: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
        at_poll: dict[str, list[str]] = {}
        telegram, discord = WatchedTelegram(), WatchedDiscord()
        async with telegram, FakeOpenAI(default_text="Mittwoch.") as openai, discord:
            work = Path(tmp)
            for n in range(runs):
                order = list(trees) if n % 2 == 0 else list(reversed(trees))
                for tree in order:
                    env = trees[tree]
                    for provider in PROVIDERS if n % 2 == 0 else reversed(PROVIDERS):
                        tag = n * 10 + order.index(tree)
                        result = await one_run(telegram, openai, work, provider, tag, env)
                        times[(tree, provider)].append(result)
                    identify[tree].append(
                        await discord_run(discord, work, n * 10 + len(at_poll), env)
                    )
            for index, tree in enumerate(trees):
                at_poll[tree] = await imports_at_first_poll(work, trees[tree], index)
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {runs} runs per "
        "row, alternating; median (min–max)\n"
    )
    print(
        "| code | provider | start -> first getUpdates | its CPU time | "
        "-> first answer in the chat |"
    )
    print("|---|---|---:|---:|---:|")
    for (tree, provider), rows in times.items():
        polled, answered, cpu = ([row[i] for row in rows] for i in range(3))
        print(
            f"| {tree} | {provider} | {_summary(polled)} | {_summary(cpu)} | {_summary(answered)} |"
        )
    print("\n| code | start -> Discord IDENTIFY (openai provider) | its CPU time |")
    print("|---|---:|---:|")
    for tree, pairs in identify.items():
        print(f"| {tree} | {_summary([w for w, _ in pairs])} | {_summary([c for _, c in pairs])} |")
    print(f"\nheavy modules loaded by importing the engine: {engine_imports() or 'none'}")
    for tree, names in at_poll.items():
        print(
            f"heavy packages a Telegram-only run had imported at its first poll ({tree}): {names}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="?", type=int, default=7)
    parser.add_argument("--before", help="a git revision to measure side by side, e.g. main")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.before))
