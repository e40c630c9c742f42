"""Issue 17.1: Discord messages sent while chatbridge was not connected are answered.

The real discord.py client and the real engine (SQLite) against the fake
Discord, which keeps every message and serves the channel history as
Discord does. "Down" is a stopped platform and engine (the same store file
is opened again) or an INVALID_SESSION that makes discord.py identify anew;
messages written meanwhile are only stored in the fake, never dispatched,
as on Discord. The fake's clock mints snowflakes an hour in the past for
the first part, so messages written "while down" can be older than
`engine.redeliver_within` (15 min) and still newer than the cursor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from chatbridge.core.metrics import Metrics
from chatbridge.platforms.discord import CatchUpLimits, DiscordPlatform
from tests.platforms.discord.conftest import ALLOWED, discord_config, echo
from tests.support.fake_discord import CHANNEL_ID, THREAD_ID, FakeDiscord
from tests.support.testbot import TestBot, make_testbot

pytestmark = pytest.mark.timeout(40)

Life = tuple[DiscordPlatform, TestBot, Metrics]
Start = Callable[..., Awaitable[Life]]
HOUR = 3600.0


@pytest.fixture
async def start(fake: FakeDiscord, tmp_path: Path) -> AsyncIterator[Start]:
    """Starts one life of the bot on the store in tmp_path (the same file every time)."""
    lives: list[Life] = []

    async def _start(*, limits: CatchUpLimits | None = None, **cfg: Any) -> Life:
        bot = await make_testbot(tmp_path, provider=echo(), allow=ALLOWED)
        metrics = bot.engine.metrics
        platform = DiscordPlatform(
            config=discord_config(fake, **cfg),
            handler=bot.engine,
            commands=bot.engine.commands,
            guild_ready_timeout=0.05,
            cursors=bot.engine.store,
            metrics=metrics,
            catch_up=limits,
        )
        bot.engine.attach(platform.name, platform.outbox)
        lives.append((platform, bot, metrics))
        await platform.start()
        await bot.engine.resume()
        return platform, bot, metrics

    yield _start
    for life in reversed(lives):
        await _stop(life)


async def _stop(life: Life) -> None:
    """Safe twice (the fixture stops every life again at the end)."""
    platform, bot, _ = life
    await platform.stop_receiving()
    await bot.engine.drain(1.0)
    await platform.aclose()
    await bot.engine.store.aclose()


def _passes(metrics: Metrics) -> float:
    """Catch-up passes finished (the counter moves once a pass took everything in)."""
    return sum(
        s.value
        for m in metrics.registry.collect()
        if m.name == "chatbridge_catch_ups"
        for s in m.samples
        if s.name.endswith("_total")
    )


async def _settle(fake: FakeDiscord, bot: TestBot, metrics: Metrics, passes: int) -> None:
    """Until `passes` catch-ups are done and every answer they caused is out."""
    await fake.wait_for(lambda: _passes(metrics) >= passes, within=20)
    await bot.engine.drain(5.0)


def _answers(fake: FakeDiscord, text: str) -> int:
    return sum(t == f"echo: {text}" for t in fake.bot_texts())


def _notices(fake: FakeDiscord, text: str) -> int:
    return sum("ich war offline" in t and f"„{text}“" in t for t in fake.bot_texts())


async def _first_life(fake: FakeDiscord, start: Start, **cfg: Any) -> Life:
    """DM, channel mention and a thread mention, each answered live; the fake's
    clock is an hour behind, so later "old" messages can sit between."""
    fake.clock = lambda: time.time() - HOUR
    life = await start(**cfg)
    await fake.send_dm("[eins]")
    await fake.send_guild_message("[zwei]", mention_bot=True)
    await fake.send_thread_message(f"<@{fake.me['id']}> [drei]")
    await fake.wait_for(lambda: all(_answers(fake, t) == 1 for t in ("[eins]", "[zwei]", "[drei]")))
    return life


def _write_while_down(fake: FakeDiscord) -> tuple[list[str], list[str], list[str]]:
    """Messages Discord keeps but never delivers: (old, young, chatter) texts.

    Synchronous on purpose: nothing can reach the bot while they are written.
    """
    dm = fake.dm_channel()
    fake.clock = lambda: time.time() - HOUR / 2  # 30 min ago: older than redeliver_within
    fake.user_message(dm, "[dm-alt]")
    fake.user_message(CHANNEL_ID, "[erwähnt-alt]", mention_bot=True)
    fake.clock = time.time
    fake.user_message(dm, "[dm-jung]")
    fake.user_message(CHANNEL_ID, "[erwähnt-jung]", mention_bot=True)
    fake.user_message(CHANNEL_ID, "[antwort-jung]", reply_to=fake.bot_messages(CHANNEL_ID)[-1].id)
    fake.user_message(THREAD_ID, "[faden-jung]")  # a follow-up in the bot's thread, no mention
    fake.user_message(CHANNEL_ID, "[geplauder]")  # channel chatter: not for the bot
    young = ["[dm-jung]", "[erwähnt-jung]", "[antwort-jung]", "[faden-jung]"]
    return ["[dm-alt]", "[erwähnt-alt]"], young, ["[geplauder]"]


def _settled(fake: FakeDiscord, old: list[str], young: list[str]) -> bool:
    return all(_notices(fake, t) >= 1 for t in old) and all(_answers(fake, t) >= 1 for t in young)


def _check(fake: FakeDiscord, old: list[str], young: list[str], chatter: list[str]) -> None:
    for text in ("[eins]", "[zwei]", "[drei]"):
        assert _answers(fake, text) == 1, f"{text} answered again"
    for text in young:
        assert (_answers(fake, text), _notices(fake, text)) == (1, 0), text
    for text in old:
        assert (_answers(fake, text), _notices(fake, text)) == (0, 1), text
    for text in chatter:
        assert not any(text in t for t in fake.bot_texts()), f"{text} was answered"


async def test_after_a_restart_what_was_missed_is_answered_once_and_old_ones_get_the_notice(
    fake: FakeDiscord, start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    first = await _first_life(fake, start)
    await _stop(first)
    old, young, chatter = _write_while_down(fake)

    caplog.set_level(logging.INFO, logger="chatbridge.platforms.discord")
    _, bot, metrics = await start()
    await fake.wait_for(lambda: _settled(fake, old, young), within=20)
    await _settle(fake, bot, metrics, passes=1)
    _check(fake, old, young, chatter)

    [line] = [r.getMessage() for r in caplog.records if "caught up" in r.getMessage()]
    assert "3 channels" in line, line  # the DM, the channel and the thread
    assert "6 taken" in line, line
    samples = {
        s.labels["outcome"]: s.value
        for m in metrics.registry.collect()
        if m.name == "chatbridge_caught_up_messages"
        for s in m.samples
        if s.name.endswith("_total")
    }
    assert samples["taken"] == 6
    assert samples["ignored"] >= 1  # the chatter (and the bot's own messages)


@pytest.mark.parametrize(
    "sharding", [{}, {"shard_count": 1, "shard_ids": [0]}], ids=["client", "auto-sharded"]
)
async def test_after_an_invalid_session_what_was_missed_is_answered_once(
    fake: FakeDiscord, start: Start, sharding: dict[str, Any]
) -> None:
    _, bot, metrics = await _first_life(fake, start, **sharding)
    await fake.send_invalid_session(resumable=False)
    old, young, chatter = _write_while_down(fake)  # before discord.py can identify again
    await fake.wait_for(lambda: fake.identify_count == 2, within=20)
    await fake.wait_for(lambda: _settled(fake, old, young), within=20)
    await _settle(fake, bot, metrics, passes=2)  # the start's pass and this one
    _check(fake, old, young, chatter)
    assert fake.resume_count == 0


async def test_a_resumed_session_reads_no_history(fake: FakeDiscord, start: Start) -> None:
    await _first_life(fake, start)
    reads = len(fake.calls_to("GET /channels/*/messages"))
    await fake.drop_connection()
    await fake.wait_for(lambda: fake.resume_count == 1 and fake.connected, within=10)
    await fake.send_dm("[nach-resume]")
    await fake.wait_for(lambda: _answers(fake, "[nach-resume]") == 1)
    assert len(fake.calls_to("GET /channels/*/messages")) == reads


async def test_catch_up_reads_only_the_newest_messages_within_the_bound(
    fake: FakeDiscord, start: Start
) -> None:
    first = await start()
    await fake.send_guild_message("[kanal]", mention_bot=True)
    await fake.wait_for(lambda: _answers(fake, "[kanal]") == 1)
    await fake.send_dm("[eins]")  # the DM is the most recent traffic
    await fake.wait_for(lambda: _answers(fake, "[eins]") == 1)
    await _stop(first)
    dm = fake.dm_channel()
    for n in range(7):
        fake.user_message(dm, f"[viele-{n}]")
    fake.user_message(CHANNEL_ID, "[kanal-später]", mention_bot=True)
    _, bot, metrics = await start(limits=CatchUpLimits(channels=1, messages=3))
    await _settle(fake, bot, metrics, passes=1)
    assert [_answers(fake, f"[viele-{n}]") for n in range(7)] == [0, 0, 0, 0, 1, 1, 1]
    assert _answers(fake, "[kanal-später]") == 0  # past the channel bound this time
    reads = fake.calls_to("GET /channels/*/messages")
    assert {c.path for c in reads} == {f"/channels/{dm}/messages"}


async def test_a_thread_the_bot_opened_is_caught_up_too(fake: FakeDiscord, start: Start) -> None:
    first = await start(thread_per_mention=True)
    question = await fake.send_guild_message("[frage]", mention_bot=True)
    thread = int(question["id"])  # Discord gives the thread its question's id
    await fake.wait_for(lambda: fake.bot_texts(thread) == ["echo: [frage]"])
    await _stop(first)
    fake.user_message(thread, "[im-faden]")  # a follow-up, no mention, while down
    _, bot, metrics = await start(thread_per_mention=True)
    await _settle(fake, bot, metrics, passes=1)
    assert fake.bot_texts(thread) == ["echo: [frage]", "echo: [im-faden]"]
