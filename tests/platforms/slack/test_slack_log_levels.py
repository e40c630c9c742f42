"""A 429 from Slack that chatbridge waits out is one INFO line, no traceback, no ERROR.

slack-sdk raises the 429 (`ratelimited`, `Retry-After`) to the outbox, which
turns it into `DeliveryRetry`; the delivery code waits and sends again, and
says so in one line (before, a waited-out 429 left no trace at INFO).
"""

from __future__ import annotations

import logging

import pytest

from chatbridge.core.app.logs import setup_logging
from tests.support import fake_slack_events as ev
from tests.support.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.fakes import ScriptedProvider

from .conftest import Launch

ANSWER = "Das Paket kommt am Mittwoch."


@pytest.mark.parametrize("method", ["chat.postMessage", "chat.update"])
async def test_a_waited_out_429_is_one_info_line_and_the_answer_arrives(
    capsys: pytest.CaptureFixture[str], fake: FakeSlack, launch: Launch, method: str
) -> None:
    setup_logging(level=logging.INFO, secrets=[BOT_TOKEN])
    words = [f"{w} " for w in ANSWER.split()]
    run = await launch(provider=ScriptedProvider(lambda p: words, chunk_delay=0.05))
    fake.rate_limit_next(method, retry_after=1)
    await run.event(ev.dm_message("Wo ist das Paket?"))
    await fake.wait_for(lambda: ANSWER in fake.bot_texts(ev.DM_CHANNEL), 30)
    await run.bot.engine.drain(5)

    assert [c.error for c in fake.calls_to(method)].count("ratelimited") == 1
    err = capsys.readouterr().err
    waits = [line for line in err.splitlines() if "rate limit" in line]
    assert len(waits) == 1, err
    assert " INFO chatbridge.core.delivery: the platform asks to wait 1s" in waits[0]
    assert " ERROR " not in err, err
    assert "Traceback" not in err
