"""A 429 from Discord that is waited out is one line at INFO or WARNING, no traceback.

With `Via` discord.py waits it out itself and logs one WARNING; without `Via`
(as behind a proxy) it raises the 429 to the outbox, which turns it into
`DeliveryRetry`; the delivery code waits and says so in one INFO line
(before, that left no trace at INFO).
"""

from __future__ import annotations

import logging

import pytest

from chatbridge.core.app.logs import setup_logging
from tests.platforms.discord.conftest import Launch
from tests.support.fake_discord import FakeDiscord
from tests.support.fakes import ScriptedProvider

ANSWER = "Das Paket kommt am Mittwoch."


@pytest.mark.parametrize(
    ("via", "expected"),
    [
        (False, " INFO chatbridge.core.delivery: the platform asks to wait 1s"),
        (True, " WARNING discord.http: We are being rate limited."),
    ],
)
@pytest.mark.parametrize("route", ["POST /channels/*/messages", "PATCH /channels/*/messages/*"])
async def test_a_waited_out_429_is_one_line_and_the_answer_arrives(
    capsys: pytest.CaptureFixture[str],
    fake: FakeDiscord,
    launch: Launch,
    route: str,
    via: bool,
    expected: str,
) -> None:
    setup_logging(level=logging.INFO, secrets=[fake.token])
    words = [f"{w} " for w in ANSWER.split()]
    running = await launch(provider=ScriptedProvider(lambda p: words, chunk_delay=0.05))
    fake.rate_limit_next(route, retry_after=1.0, via=via)
    await fake.send_dm("Wo ist das Paket?")
    await running.ring()

    assert fake.bot_texts(fake.dm_channel()) == [ANSWER]
    assert [c.status for c in fake.calls_to(route)].count(429) == 1
    err = capsys.readouterr().err
    waits = [line for line in err.splitlines() if "rate limit" in line]
    assert len(waits) == 1, err
    assert expected in waits[0]
    assert " ERROR " not in err, err
    assert "Traceback" not in err
