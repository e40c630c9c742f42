"""Engine cost per message with 100 scopes configured vs none
(run: python3 -m tests.bench.bench_scopes [--rounds N] [--per-round N]).

Two engines built by the composition root from two configs that differ only
in `scopes:` (none, or 100: groups, channels, servers, workspaces and the
platforms), each with its own SQLite file and the debug provider. Messages
come from a Telegram group whose chain matches two of the scopes, so every
message is resolved and merged; conversations rotate so sessions stay
short. Rounds alternate between the two engines (A B A B …) so machine load
hits both alike; the table gives the median over rounds of each round's
per-message wall time and CPU time, and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from chatbridge.config import ChatbridgeConfig, load_config_text
from chatbridge.core.app.wiring import engine_from_config
from chatbridge.core.engine import Engine
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from tests.bench.bench_engine import NullOutbox

GROUP = -1000000042
BASE = """
bot: {{system_prompt: "You are a helpful assistant."}}
providers:
  main: {{type: debug}}
memory: {{path: "{db}"}}
access: {{allow: [telegram:{group}]}}
"""


def _scopes() -> str:
    """100 scopes of every kind; the bench group's own and its platform's among them."""
    lines = ["scopes:"]
    for i in range(40):
        lines.append(f'  "telegram:-10000000{i:02d}": {{system_prompt: "Group {i}", model: m{i}}}')
    for i in range(20):
        lines.append(f"  discord:{100000 + i}: {{model: channel-{i}}}")
        lines.append(f"  discord:guild:{200000 + i}: {{system_prompt: Server {i}}}")
    for i in range(17):
        lines.append(f"  slack:C0CHAN{i:02d}: {{language: en, inject_entries: 2}}")
    lines.append(f'  "telegram:{GROUP}": {{system_prompt: "Support", session_ttl: 10m}}')
    lines.append("  telegram: {language: de, require_mention: true}")
    lines.append("  discord: {language: en}")
    return "\n".join(lines) + "\n"


def _config(db: Path, scopes: bool) -> ChatbridgeConfig:
    text = BASE.format(db=db, group=GROUP) + (_scopes() if scopes else "")
    config = load_config_text(text, source="bench.yaml", environ={})
    assert len(config.scopes) == (100 if scopes else 0)
    return config


async def _round(engine: Engine, per_round: int, offset: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per message over one round."""
    outbox = NullOutbox()
    place = (f"telegram:{GROUP}", "telegram")
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(per_round):
        user = str(1000 + (offset + n) % 50)
        conversation = Conversation("telegram", str(GROUP), user, kind=ChatKind.GROUP)
        message = IncomingMessage(conversation, f"Frage {n}", place=place)
        await engine.handle(message, outbox)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / per_round * 1e6, cpu / per_round * 1e6


def _resolve_us(engine: Engine, calls: int = 100_000) -> float:
    """What resolving one message's place costs, alone (µs per call)."""
    conversation = Conversation("telegram", str(GROUP), "1", kind=ChatKind.GROUP)
    message = IncomingMessage(conversation, "x", place=(f"telegram:{GROUP}", "telegram"))
    started = time.perf_counter()
    for _ in range(calls):
        engine.places.for_message(message)
    return (time.perf_counter() - started) / calls * 1e6


async def measure(
    rounds: int, per_round: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, float]]:
    results: dict[str, list[tuple[float, float]]] = {"none": [], "100 scopes": []}
    resolve: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        none = _config(Path(tmp) / "none.db", scopes=False)
        many = _config(Path(tmp) / "many.db", scopes=True)
        async with (
            engine_from_config(none, environ={}) as (plain, _),
            engine_from_config(many, environ={}) as (scoped, _),
        ):
            assert scoped.places.resolve((f"telegram:{GROUP}", "telegram")).scope
            for engine in (plain, scoped):  # warm-up: imports, first sessions
                await _round(engine, per_round, 0)
            for index in range(rounds):
                order = [("none", plain), ("100 scopes", scoped)]
                if index % 2:
                    order.reverse()
                for name, engine in order:
                    results[name].append(await _round(engine, per_round, index * per_round))
            resolve = {"none": _resolve_us(plain), "100 scopes": _resolve_us(scoped)}
    return results, resolve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--per-round", type=int, default=200)
    args = parser.parse_args()
    print(
        f"# engine cost per message, 100 scopes vs none — "
        f"{platform.processor() or platform.machine()}, Python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f}; {args.rounds} alternating rounds of "
        f"{args.per_round} messages each"
    )
    results, resolve = asyncio.run(measure(args.rounds, args.per_round))
    print("| scopes configured | messages | wall µs/message (median of rounds) "
          "| CPU µs/message (median of rounds) | resolving the place alone, µs |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    medians = {}
    for name, rows in results.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        medians[name] = (wall, cpu)
        count = len(rows) * args.per_round
        print(f"| {name} | {count} | {wall:.0f} | {cpu:.0f} | {resolve[name]:.2f} |")
    (wall0, cpu0), (wall1, cpu1) = medians["none"], medians["100 scopes"]
    print(
        f"\n100 scopes vs none: wall {100 * (wall1 / wall0 - 1):+.1f} %, "
        f"CPU {100 * (cpu1 / cpu0 - 1):+.1f} %"
    )


if __name__ == "__main__":
    main()
