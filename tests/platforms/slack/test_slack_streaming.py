"""Long answers, the edit rate and 429s, through the real engine and delivery code."""

from __future__ import annotations

import itertools
import re

from tests.support import fake_slack_events as ev
from tests.support.fake_slack import FakeSlack
from tests.support.fakes import ScriptedProvider

from .conftest import Launch

CODE = [f"row_{i:04d} = load('chemitek', {i})  # batch" for i in range(800)]
PROSE = "Die Lieferung kommt am Mittwoch an, sagt UPS. " * 400
LONG = "Hier ist das Skript:\n\n```python\n" + "\n".join(CODE) + "\n```\n\n" + PROSE


def _chunks(text: str, size: int = 1500) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_45k_answer_with_code_arrives_complete_and_fenced(
    fake: FakeSlack, launch: Launch
) -> None:
    assert len(LONG) >= 45_000
    run = await launch(provider=ScriptedProvider(lambda prompt: _chunks(LONG)))
    mention = ev.app_mention("Schreib das Skript")
    await run.event(mention)
    await fake.wait_for(
        lambda: any(t.rstrip().endswith("sagt UPS.") for t in fake.bot_texts(ev.CHANNEL)), 10
    )
    await run.bot.engine.drain(5.0)
    texts = fake.thread(ev.CHANNEL, mention["ts"])
    assert len(texts) >= 13, "45k chars must be split over several messages"
    assert all(len(t) <= 4_000 for t in texts)
    for text in texts:
        assert text.count("```") % 2 == 0, "a message with an unbalanced code fence"
    shown = "\n".join(texts)
    for line in CODE:
        assert shown.count(line) == 1, line
    inside = "".join(re.findall(r"```(.*?)```", shown, flags=re.S))
    assert all(line in inside for line in CODE), "code lines left their code block"
    assert " ".join(shown.split()).count("Die Lieferung kommt am Mittwoch") == 400


async def test_no_message_is_updated_sooner_than_edit_interval(
    fake: FakeSlack, launch: Launch
) -> None:
    provider = ScriptedProvider(lambda prompt: [f"Teil {i}. " for i in range(40)], chunk_delay=0.02)
    run = await launch(provider=provider, edit_interval=0.25)
    await run.event(ev.dm_message("Erzähl was"))
    await fake.wait_for(lambda: any("Teil 39." in t for t in fake.bot_texts(ev.DM_CHANNEL)), 10)
    await run.bot.engine.drain(2.0)

    (reply,) = fake.messages(ev.DM_CHANNEL)[1:]
    calls = [c for c in fake.calls if c.method in ("chat.postMessage", "chat.update")]
    updates = [c.at for c in calls if c.params.get("ts") == reply.ts]
    assert len(updates) >= 2, "the answer was not streamed with edits"
    times = [calls[0].at, *updates]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Exact: each call is paced from the previous call's return, which comes
    # after the fake noted its arrival (on the same monotonic clock).
    assert min(gaps) >= 0.25, gaps


async def test_a_429_on_chat_update_loses_nothing(fake: FakeSlack, launch: Launch) -> None:
    provider = ScriptedProvider(lambda prompt: _chunks(LONG, 400), chunk_delay=0.002)
    run = await launch(provider=provider, edit_interval=0.0)
    fake.rate_limit_next("chat.update", retry_after=1, times=2)
    await run.event(ev.dm_message("Schreib das Skript"))
    await fake.wait_for(
        lambda: any(t.rstrip().endswith("sagt UPS.") for t in fake.bot_texts(ev.DM_CHANNEL)), 10
    )
    await run.bot.engine.drain(5.0)
    refused = [c for c in fake.calls_to("chat.update") if c.error == "ratelimited"]
    assert len(refused) == 2, "the rate limit was never hit"
    shown = "\n".join(fake.bot_texts(ev.DM_CHANNEL))
    assert all(shown.count(line) == 1 for line in CODE)
    assert " ".join(shown.split()).count("Die Lieferung kommt am Mittwoch") == 400
