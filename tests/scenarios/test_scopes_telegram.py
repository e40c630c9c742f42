"""Issue 20 on Telegram, end to end: `chatbridge run` with scopes for groups and
the platform, then a SIGHUP that changes a group's prompt and model. Real
python-telegram-bot and openai SDK against the fakes, the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.test_reload_and_readiness import _Run, _wait_status
from tests.support.cli import free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import run_config_text
from tests.support.scoped_providers import main_and_backup, seen
from tests.support.sse import Body

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SUPPORT = -1001111  # its own prompt and model; its forum topics follow it
BACKUP = -1002222  # `provider: backup`, no mention needed
TEAM = -1003333  # only `model`: keeps the platform scope's prompt


def _config(
    telegram: FakeTelegram,
    main: FakeOpenAI,
    backup: FakeOpenAI,
    port: int,
    *,
    support: str = "SUPPORT PROMPT",
    model: str = "gpt-support",
) -> str:
    return run_config_text(
        port=port,
        telegram=telegram.base_url,
        openai=main.base_url,
        bot={"system_prompt": "TOP PROMPT"},
        providers=main_and_backup(backup),
        platforms={"telegram": {"token": telegram.token, "edit_interval": "0.2s"}},
        scopes={
            f"telegram:{SUPPORT}": {"system_prompt": support, "model": model},
            f"telegram:{BACKUP}": {"provider": "backup", "require_mention": False},
            f"telegram:{TEAM}": {"model": "gpt-team"},
            "telegram": {"system_prompt": "PLATFORM PROMPT"},
        },
    )


async def _group(
    telegram: FakeTelegram, fake: FakeOpenAI, chat: int, text: str, thread: int | None = None
) -> Body:
    before = len(fake.requests)
    telegram.push_text(chat, ALICE, text, chat_type="supergroup", thread_id=thread)
    await telegram.wait_for(lambda: len(fake.requests) > before, within=30)
    return fake.requests[-1].body


async def test_scopes_on_telegram_through_chatbridge_run(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "chatbridge.yaml"
    async with (
        FakeTelegram() as telegram,
        FakeOpenAI(default_text="from main") as main,
        FakeOpenAI(default_text="from backup") as backup,
    ):
        config.write_text(_config(telegram, main, backup, port))
        run = await _Run.start(tmp_path)
        try:
            await _wait_status(f"http://127.0.0.1:{port}/readyz", 200)
            first = await _group(telegram, main, SUPPORT, "@bridge_bot Wo ist mein Paket?")
            await telegram.wait_for(lambda: len(telegram.bot_texts(SUPPORT)) == 1, within=30)
            topic = await _group(telegram, main, SUPPORT, "@bridge_bot im Topic", thread=7)
            telegram.push_text(ALICE, ALICE, "privat")
            await telegram.wait_for(lambda: len(main.requests) == 3, within=30)
            private = main.requests[-1].body
            team = await _group(telegram, main, TEAM, "@bridge_bot Teamfrage")
            unmentioned = await _group(telegram, backup, BACKUP, "ganz ohne Erwähnung")
            await telegram.wait_for(lambda: bool(telegram.bot_texts(BACKUP)), within=30)
            telegram.push_text(TEAM, ALICE, "nicht an den Bot", chat_type="supergroup")
            telegram.push_text(SUPPORT, ALICE, "/status", chat_type="supergroup")
            await telegram.wait_for(
                lambda: any("Scope" in t for t in telegram.bot_texts(SUPPORT)), within=30
            )
            answered_before = len(main.requests)

            config.write_text(
                _config(telegram, main, backup, port, support="NEW PROMPT", model="gpt-new")
            )
            await run.reload("reloaded the config")
            after = await _group(telegram, main, SUPPORT, "@bridge_bot Und jetzt?")
        finally:
            log = await run.stop()

    assert run.process.returncode == 0, log
    assert seen(first) == ("gpt-support", "SUPPORT PROMPT", "Wo ist mein Paket?")
    assert seen(topic)[:2] == ("gpt-support", "SUPPORT PROMPT"), "the topic left its group"
    assert seen(private) == ("gpt-main", "PLATFORM PROMPT", "privat")
    assert seen(team) == ("gpt-team", "PLATFORM PROMPT", "Teamfrage")
    assert seen(unmentioned) == ("gpt-backup", "PLATFORM PROMPT", "ganz ohne Erwähnung")
    assert len(backup.requests) == 1
    assert telegram.bot_texts(BACKUP) == ["from backup"]
    assert answered_before == 4, "an unmentioned message in TEAM reached the provider"
    status = next(t for t in telegram.bot_texts(SUPPORT) if "Scope" in t)
    assert f"Scope: telegram:{SUPPORT}" in status
    assert "gpt-support (main)" in status
    # After SIGHUP the next message has the new prompt and model, in a new
    # session that bridges the earlier exchange (the model changed).
    model, system, last = seen(after)
    assert (model, system) == ("gpt-new", "NEW PROMPT")
    assert len(after["messages"]) == 2, "the old session (other model) was continued"
    assert last.startswith("<conversation_history>")
    assert "Wo ist mein Paket?" in last
    assert "Traceback" not in log
