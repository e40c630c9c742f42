"""Metrics count outcomes without naming anyone."""

from __future__ import annotations

from chatbridge.core.metrics import OUTCOMES
from tests.support.testbot import ALICE, TestBot


async def test_outcomes_are_counted_by_platform_without_user_ids(bot: TestBot) -> None:
    await bot.say("Hallo")
    await bot.say("/help")
    await bot.say("Hallo", user="999")
    await bot.say("Nochmal", event_id="e1")
    await bot.say("Nochmal", event_id="e1")
    text = bot.engine.metrics.render().decode()
    for outcome, count in (("answered", 2), ("command", 1), ("denied", 1), ("duplicate", 1)):
        assert outcome in OUTCOMES
        labels = f'outcome="{outcome}",platform="telegram",scope="default"'
        line = f"chatbridge_messages_total{{{labels}}} {count}.0"
        assert line in text, line
    assert 'chatbridge_reply_seconds_count{platform="telegram"} 2.0' in text
    assert 'chatbridge_tokens_total{direction="input",scope="default"} 20.0' in text
    assert f'"{ALICE}"' not in text
    assert '"999"' not in text
    assert "user" not in text
    assert "Hallo" not in text
