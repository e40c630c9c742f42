"""Linking Telegram ↔ Discord ↔ Slack through `chatbridge run` over the three
platform fakes and the OpenAI fake (real SDKs, real SQLite).

Alice asks about the parcel on Telegram, links her Discord DM with the code
from Telegram, and "Soll Mittwoch kommen" in a new Discord session is
understood from the Telegram ring; then Slack links too and understands the
same. After /unlink the Discord ID's new session sees only its own entries.
The code reaches neither the model nor the log, not even at debug level.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.scenarios.test_chemitek_slack import wait_ready
from tests.support import fake_slack_events as ev
from tests.support.chemitek import FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import free_port
from tests.support.fake_discord import USER_ID as DISCORD_USER
from tests.support.fake_discord import FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config
from tests.support.running import chatbridge_run
from tests.support.sse import Reply

_CODE = re.compile(r"/link ([A-Z0-9]{6,12})\b")


def _config(
    home: Path, tg: FakeTelegram, dc: FakeDiscord, sl: FakeSlack, ai: FakeOpenAI, port: int
) -> None:
    write_run_config(
        home,
        port=port,
        telegram=tg.base_url,
        openai=ai.base_url,
        allow=(ALICE, f"discord:{DISCORD_USER}", f"slack:{ev.USER_ID}"),
        engine={"session_ttl": "1s"},
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={
            "telegram": {"edit_interval": "0.2s"},
            "discord": {
                "enabled": True,
                "api_base": dc.api_base,
                "gateway_url": dc.gateway_url,
                "edit_interval": "0.2s",
            },
            "slack": {
                "enabled": True,
                "app_token": "${SLACK_APP_TOKEN}",
                "base_url": sl.base_url,
                "edit_interval": "0.2s",
            },
        },
    )


def _code(text: str) -> str:
    match = _CODE.search(text)
    assert match is not None, text
    return match.group(1)


async def test_linking_across_three_platforms_bridges_the_seed_story(tmp_path: Path) -> None:
    port = free_port()
    async with (
        FakeTelegram() as telegram,
        FakeDiscord() as discord,
        FakeSlack() as slack,
        FakeOpenAI(chunk_chars=12) as openai,
    ):
        openai.script(*[Reply(text=chemitek_model) for _ in range(6)])
        _config(tmp_path, telegram, discord, slack, openai, port)
        env = {
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "DISCORD_BOT_TOKEN": discord.token,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "OPENAI_API_KEY": "sk-link-1",
            "CHATBRIDGE_LOG_LEVEL": "debug",
        }
        dm = discord.dm_channel()

        async def telegram_says(text: str) -> str:
            before = len(telegram.bot_texts(ALICE))
            telegram.push_text(ALICE, ALICE, text)
            await telegram.wait_for(lambda: len(telegram.bot_texts(ALICE)) > before, 30)
            return telegram.bot_texts(ALICE)[before]

        async def discord_says(text: str) -> str:
            before = len(discord.bot_texts(dm))
            await discord.send_dm(text)
            await discord.wait_for(lambda: len(discord.bot_texts(dm)) > before, 30)
            return discord.bot_texts(dm)[before]

        async def slack_says(text: str) -> str:
            before = len(slack.bot_texts(ev.DM_CHANNEL))
            await slack.socket_event(ev.dm_message(text))
            await slack.wait_for(lambda: len(slack.bot_texts(ev.DM_CHANNEL)) > before, 30)
            return slack.bot_texts(ev.DM_CHANNEL)[before]

        async with chatbridge_run(tmp_path, env) as ran:
            await wait_ready(port)
            assert await telegram_says(FIRST) == TRACKING
            first_code = _code(await telegram_says("/link"))
            linked = await discord_says(f"/link {first_code}")
            assert await discord_says(SECOND) == UNDERSTOOD  # a new Discord session
            slack_code = _code(await telegram_says("/link"))
            wrong = await slack_says(f"/link {first_code}")  # used already
            joined = await slack_says(f"/link {slack_code}")
            assert await slack_says(SECOND) == UNDERSTOOD
            unlinked = await discord_says("/unlink")
            await discord_says("/new")
            await discord_says(SECOND)

    assert ran.code == 0, ran.stderr
    assert linked.startswith("Verknüpft:")
    assert f"discord:{DISCORD_USER}" in linked
    assert wrong.startswith("Dieser Code ist falsch, benutzt oder abgelaufen")
    assert joined.startswith("Verknüpft:")
    assert unlinked.startswith(f"Getrennt: discord:{DISCORD_USER}")
    bridged = [r.body["messages"][-1]["content"] for r in openai.requests]
    assert len(bridged) == 4
    assert f"User: {FIRST}" in bridged[1], "Discord's new session missed the Telegram ring"
    assert f"User: {FIRST}" in bridged[2], "Slack's new session missed the Telegram ring"
    assert f"User: {FIRST}" not in bridged[3], "unlinked Discord still sees Telegram's entries"
    everything = ran.stderr + "".join(str(r.body) for r in openai.requests)
    for code in (first_code, slack_code):
        leaks = [line[:300] for line in everything.splitlines() if code in line]
        assert not leaks, leaks
