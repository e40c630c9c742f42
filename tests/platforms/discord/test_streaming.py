"""Long streamed answers: split at 2,000 characters with balanced code fences,
edits throttled to `edit_interval`, a 429 on an edit waited out."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Sequence

from tests.platforms.discord.conftest import Launch
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import TestBots

CODE_LINES = [f"value_{i:03d} = compute({i}, 'chemitek')" for i in range(140)]
LONG_ANSWER = (
    "Hier ist das Skript:\n\n```python\n"
    + "\n".join(CODE_LINES)
    + "\n```\n\n"
    + "Danach läuft alles. " * 120
)
DONE = "Danach läuft alles."


def _busiest(times: Sequence[float]) -> int:
    """The most of `times` in any 1 s window."""
    times = sorted(times)
    return max(bisect.bisect_right(times, at + 1.0) - i for i, at in enumerate(times))


def _chunks(text: str, size: int = 150) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_7000_char_answer_is_split_below_2000_with_balanced_fences(
    fake: FakeDiscord, launch: Launch
) -> None:
    assert len(LONG_ANSWER) >= 7000
    running = await launch(provider=ScriptedProvider(lambda p: _chunks(LONG_ANSWER)))
    await fake.send_dm("Schreib mir das Skript")
    dm = fake.dm_channel()
    await running.ring()
    texts = fake.bot_texts(dm)
    assert len(texts) >= 4
    assert all(len(t) <= 2000 for t in texts)
    assert all(t.count("```") % 2 == 0 for t in texts), "a chunk has an unbalanced fence"
    shown = "\n".join(texts)
    assert all(shown.count(line) == 1 for line in CODE_LINES), "code was lost or repeated"
    assert texts[-1].rstrip().endswith(DONE)
    assert sum(t.count(DONE) for t in texts) == 120, "the answer was truncated"


async def test_edits_of_one_message_respect_the_edit_interval(
    fake: FakeDiscord, launch: Launch
) -> None:
    provider = ScriptedProvider(lambda p: _chunks("wort " * 300, 20), chunk_delay=0.01)
    running = await launch(provider=provider, edit_interval=0.2)
    await fake.send_dm("Erzähl was")
    await running.ring()
    message = fake.bot_messages(fake.dm_channel())[0]
    assert message.edits >= 3, "the answer was not streamed"
    assert fake.fast_edits(0.19) == 0
    assert message.content.strip() == ("wort " * 300).strip()


async def test_a_429_with_via_on_an_edit_is_waited_out(fake: FakeDiscord, launch: Launch) -> None:
    provider = ScriptedProvider(lambda p: _chunks("satz. " * 200, 30), chunk_delay=0.01)
    running = await launch(provider=provider, edit_interval=0.05)
    fake.rate_limit_next("PATCH /channels/*/messages/*", retry_after=0.3, times=1, via=True)
    await fake.send_dm("Bitte lang")
    await running.ring()
    assert [c.status for c in fake.calls_to("PATCH /channels/*")].count(429) == 1
    assert fake.bot_texts(fake.dm_channel())[-1].strip() == ("satz. " * 200).strip()


async def test_twenty_users_at_once_stay_well_under_discords_global_limit(
    fake: FakeDiscord, launch: Launch, testbot: TestBots
) -> None:
    """Progress edits every 0.05 s for 20 streams would be ~400 REST calls a
    second; the bot's shared budget lets at most 35 through in any second
    (arrivals at the fake may bunch a little on a busy machine, staying well
    under Discord's 50), and every answer still arrives whole."""
    users = [USER_ID + i for i in range(20)]
    answer = "wort " * 240
    provider = ScriptedProvider(lambda p: _chunks(answer, 20), chunk_delay=0.02)
    bot = await testbot(provider=provider, allow=tuple(f"discord:{u}" for u in users))
    running = await launch(bot=bot, edit_interval=0.05)
    pace, granted = running.platform._pace, []
    take = pace.take

    async def recorded(priority: int = 0) -> None:  # a spy: when the budget let a call go
        await take(priority)
        granted.append(time.monotonic())

    pace.take = recorded  # type: ignore[method-assign]
    sent_before = len(fake.calls)
    await asyncio.gather(*(fake.send_dm(f"Frage von {u}", author=u) for u in users))
    for user in users:
        await running.ring(user)
    for user in users:
        assert fake.bot_texts(fake.dm_channel(user))[-1].strip() == answer.strip()
    replies = [
        c.at
        for c in fake.calls[sent_before:]
        if c.path.startswith("/channels/") and c.method in ("POST", "PATCH")
    ]
    assert _busiest(granted) <= 35
    assert 20 <= _busiest(replies) < 50
    assert len(granted) == len(replies)
    assert sum(1 for c in fake.calls[sent_before:] if c.method == "PATCH") > 20, "no streaming"
