"""Tokens a live session sends (run: python3 -m tests.bench.bench_tokens).

The real engine on SQLite answers a 21- and a 100-message chat
(`tests.support.long_chat`: the seed's parcel question first, an ordinary
day's chat with answers of a few hundred characters, the seed's follow-up
"Soll Mittwoch kommen" at message 21), one message a minute, with
`engine.session_max_tokens` unbounded (every turn up to `session_max_turns`:
what chatbridge sent before the bound), at its default (3000) and at 500.
Tokens are counted as the bound counts them: the request's characters (system
prompt and every message) / 4. "follow-up" says whether the model, which
understands message 21 only if the tracking number is in what it was sent,
understood it.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from chatbridge.core.engine import EngineSettings
from chatbridge.core.ports import Prompt
from chatbridge.core.session_fit import estimate_tokens
from tests.support import long_chat
from tests.support.chemitek import UNDERSTOOD
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import make_testbot

BOUNDS = (("unbounded", 10_000_000), ("default 3000", 3000), ("500", 500))


def _tokens(prompt: Prompt) -> int:
    return estimate_tokens(prompt.system, *(turn.content for turn in prompt.messages))


async def run(length: int, bound: int, directory: Path) -> dict[str, object]:
    settings = replace(EngineSettings(), session_max_tokens=bound)
    provider = ScriptedProvider(long_chat.answer)
    bot = await make_testbot(directory, provider=provider, settings=settings)
    replies = []
    try:
        for text in long_chat.chat(length):
            bot.clock.advance(60)
            replies.append(await bot.say(text))
    finally:
        await bot.engine.store.aclose()
    sizes = [_tokens(prompt) for prompt in provider.prompts]
    return {
        "at_21": sizes[20],
        "mean": statistics.fmean(sizes),
        "max": max(sizes),
        "messages_21": len(provider.prompts[20].messages),
        "resolved": replies[20] == UNDERSTOOD,
    }


def main() -> None:
    print(
        f"# tokens per request (characters / 4) — Python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        "| chat | session_max_tokens | tokens at message 21 | messages in request 21 "
        "| mean tokens/message | max | follow-up at 21 |"
    )
    print("|---:|---|---:|---:|---:|---:|:---:|")
    for length in (21, 100):
        for name, bound in BOUNDS:
            with tempfile.TemporaryDirectory() as tmp:
                r = asyncio.run(run(length, bound, Path(tmp)))
            print(
                f"| {length} | {name} | {r['at_21']} | {r['messages_21']} | {r['mean']:.0f} "
                f"| {r['max']} | {'resolved' if r['resolved'] else 'NOT resolved'} |"
            )


if __name__ == "__main__":
    main()
