"""Secrets stay out of the logs when the HTTP libraries really log URLs.

The Bot API puts the token in every URL path, and httpx logs each request's
URL. Here the SDK and HTTP loggers are turned up to DEBUG on purpose (as an
operator chasing a network problem would), the real python-telegram-bot and
openai SDKs talk to the fakes through the real engine, and the log must show
the requests — with `[secret]` where the token was — and no secret at all.
The secrets are the ones `secrets_of()` finds in a config loaded from YAML.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from chatbridge.config import load_config_text
from chatbridge.core.app.logs import setup_logging
from chatbridge.core.app.wiring import secrets_of
from chatbridge.platforms.telegram import TelegramPlatform
from chatbridge.providers.factory import build_chain
from tests.support.closing import Closing
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Reply
from tests.support.testbot import ALICE, TestBots

API_KEY = "sk-proj-Logs4c1eNeverShown9"
THIRD_PARTY = ("httpx", "httpx2", "httpcore", "telegram", "openai")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in THIRD_PARTY}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


async def test_debug_http_logs_show_the_urls_but_never_a_secret(
    testbot: TestBots, closing: Closing, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.api_key = API_KEY
        openai.script(Reply(text="Mittwoch, sagt Chemitek."))
        environ = {"TELEGRAM_BOT_TOKEN": telegram.token, "OPENAI_API_KEY": API_KEY}
        config = load_config_text(
            f"""
providers:
  main: {{type: openai, model: gpt-test, api_key: "${{OPENAI_API_KEY}}",
         base_url: "{openai.base_url}"}}
platforms:
  telegram: {{enabled: true, token: "${{TELEGRAM_BOT_TOKEN}}", base_url: "{telegram.base_url}",
             edit_interval: 0s}}
""",
            source="chatbridge.yaml",
            environ=environ,
        )
        setup_logging(level=logging.DEBUG, secrets=secrets_of(config, environ))
        for name in THIRD_PARTY:
            logging.getLogger(name).setLevel(logging.DEBUG)
        # Closed with its SDK client: left to the garbage collector, the client
        # closes its connections from a later test's loop, on this closed one.
        bot = await testbot(provider=closing(build_chain(config.providers)))
        platform = TelegramPlatform(
            config=config.platforms.telegram, handler=bot.engine, commands=bot.engine.commands
        )
        bot.engine.attach(platform.name, platform.outbox)
        await platform.start()
        try:
            telegram.push_text(int(ALICE), int(ALICE), "Wo bleibt das Paket?")
            await telegram.wait_for(
                lambda: "Mittwoch, sagt Chemitek." in telegram.bot_texts(int(ALICE)), within=20
            )
        finally:
            await platform.aclose()
    err = capsys.readouterr().err

    base = telegram.base_url  # http://127.0.0.1:PORT/bot
    for method in ("getMe", "getUpdates", "sendMessage"):
        assert f"HTTP Request: POST {base}[secret]/{method}" in err, method
    assert f"POST {openai.base_url}/chat/completions" in err  # the openai SDK's request
    assert telegram.token not in err
    assert telegram.token.partition(":")[2] not in err  # not even the part after the bot ID
    assert API_KEY not in err
