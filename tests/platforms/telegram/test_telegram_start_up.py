"""Start-up sentences of the Telegram adapter name the real cause.

python-telegram-bot raises `InvalidToken` for a 401 and a 404 alike; only the
401 means the token was refused. A 404 is a `base_url` with no Bot API behind
it (a typo'd path, another web server), and saying "rejected the bot token"
there sends the admin to BotFather for nothing.
"""

from __future__ import annotations

import pytest

from chatbridge.core.ports import PlatformStartFailed
from tests.platforms.telegram.conftest import Launch
from tests.support.fake_telegram import FakeTelegram


async def test_a_base_url_without_a_bot_api_says_so(fake: FakeTelegram, launch: Launch) -> None:
    wrong = fake.base_url.replace("/bot", "/api/bot")  # answered by the server's plain 404
    with pytest.raises(PlatformStartFailed) as info:
        await launch(base_url=wrong)
    message = str(info.value)
    assert message.startswith(f"no Bot API at {wrong} (getMe answered 404)"), message
    assert "platforms.telegram.base_url" in message
    assert "rejected" not in message
    assert fake.token not in message


async def test_a_token_the_bot_api_does_not_know_is_rejected(
    fake: FakeTelegram, launch: Launch
) -> None:
    with pytest.raises(PlatformStartFailed) as info:
        await launch(token="123456:not-the-token-of-this-bot")
    assert str(info.value) == "telegram rejected the bot token; check platforms.telegram.token"
