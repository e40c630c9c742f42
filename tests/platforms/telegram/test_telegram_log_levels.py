"""A 429 that chatbridge waits out is no ERROR line and no traceback.

PTB's `AIORateLimiter` (with `max_retries=0`, chatbridge's delivery code owns
the waiting) logged every 429 it passed on as `ERROR … Rate limit hit after
maximum of 0 retries` with a traceback, although the answer arrived; the
library-log rules turned that into a WARNING. chatbridge's own `TelegramPacer`
passes a 429 on without logging, so that logger stays silent.
"""

from __future__ import annotations

import logging

import pytest

from chatbridge.core.app.logs import setup_logging
from tests.platforms.telegram.conftest import Launch
from tests.support.fake_telegram import FakeTelegram
from tests.support.testbot import ALICE, TestBots

# PTB's RetryAfter warns about its own future int -> timedelta change.
pytestmark = pytest.mark.filterwarnings("ignore:.*retry_after.*:DeprecationWarning")


async def test_a_waited_out_429_is_one_warning_and_the_answer_arrives(
    capsys: pytest.CaptureFixture[str], fake: FakeTelegram, launch: Launch, testbot: TestBots
) -> None:
    setup_logging(level=logging.INFO, secrets=[fake.token])
    bot = await testbot()
    try:
        await launch(engine=bot.engine)
        fake.fail_next("sendMessage", retry_after=1)
        fake.push_text(int(ALICE), int(ALICE), "Wo ist das Paket?")
        await fake.wait_for(lambda: fake.bot_texts(int(ALICE)) != [], within=20)
    finally:
        await bot.engine.drain(5)
    assert fake.failures_left("sendMessage") == 0, "the 429 was never served"
    assert fake.bot_texts(int(ALICE)) == ["echo: Wo ist das Paket?"]

    err = capsys.readouterr().err
    limiter = [line for line in err.splitlines() if "telegram.ext.AIORateLimiter" in line]
    assert not limiter, limiter
    assert " ERROR " not in err, err
    assert "Traceback" not in err
