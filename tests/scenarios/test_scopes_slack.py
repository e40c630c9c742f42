"""Issue 20 on Slack, end to end: `chatbridge run` (Socket Mode) with scopes for
the workspace, a channel (only `model`), another channel (`provider: backup`,
no mention needed) and the platform. Real slack-bolt and openai SDK against
the fakes, the real CLI; `config explain` asks the fake for the workspace."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.scenarios.test_chemitek_slack import wait_ready
from tests.support import fake_slack_events as ev
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.run_config import run_config_text
from tests.support.scoped_providers import main_and_backup, seen
from tests.support.sse import Body

pytestmark = pytest.mark.timeout(90)

SUPPORT, QUIET = "C0SUPPORT", "C0QUIET"


def _config(slack: FakeSlack, main: FakeOpenAI, backup: FakeOpenAI, port: int) -> str:
    return run_config_text(
        port=port,
        openai=main.base_url,
        allow=(f"slack:{ev.USER_ID}",),
        bot={"system_prompt": "TOP PROMPT"},
        providers=main_and_backup(backup),
        platforms={
            "slack": {
                "enabled": True,
                "bot_token": "${SLACK_BOT_TOKEN}",
                "app_token": "${SLACK_APP_TOKEN}",
                "base_url": slack.base_url,
                "edit_interval": "0.2s",
            }
        },
        scopes={
            f"slack:team:{ev.TEAM_ID}": {"system_prompt": "TEAM PROMPT"},
            f"slack:{ev.CHANNEL}": {"model": "gpt-general"},
            f"slack:{SUPPORT}": {"provider": "backup", "require_mention": False},
            "slack": {"language": "en"},
        },
    )


async def _ask(slack: FakeSlack, fake: FakeOpenAI, event: dict) -> Body:
    before = len(fake.requests)
    await slack.socket_event(event)
    await slack.wait_for(lambda: len(fake.requests) > before, within=30)
    return fake.requests[-1].body


async def test_scopes_on_slack_through_chatbridge_run(tmp_path: Path) -> None:
    async with (
        FakeSlack() as slack,
        FakeOpenAI(default_text="from main") as main,
        FakeOpenAI(default_text="from backup") as backup,
    ):
        port = free_port()
        (tmp_path / "chatbridge.yaml").write_text(_config(slack, main, backup, port))
        env = clean_env(
            {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "OPENAI_API_KEY": "x"}
        )
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await wait_ready(port)
            mention = ev.app_mention("im Kanal")
            root = mention["ts"]
            channel = await _ask(slack, main, mention)
            await slack.wait_for(lambda: slack.thread(ev.CHANNEL, root) == ["from main"], 20)
            follow_up = await _ask(slack, main, ev.channel_message("im Thread", thread_ts=root))
            private = await _ask(slack, main, ev.dm_message("per DM"))
            plain = ev.channel_message("ohne Erwähnung", channel=SUPPORT)
            unmentioned = await _ask(slack, backup, plain)
            await slack.wait_for(lambda: bool(slack.thread(SUPPORT, plain["ts"])), within=20)
            await slack.socket_event(ev.channel_message("nicht an dich", channel=QUIET))
            status = ev.app_mention("/status")
            await slack.socket_event(status)
            await slack.wait_for(lambda: bool(slack.thread(ev.CHANNEL, status["ts"])), 20)
            explained = await run_cli(
                "config", "explain", "--chat", f"slack:{ev.CHANNEL}", cwd=tmp_path, env=env
            )
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 20)

    assert process.returncode == 0, err.decode()
    assert seen(channel) == ("gpt-general", "TEAM PROMPT", "im Kanal")
    assert seen(follow_up)[:2] == ("gpt-general", "TEAM PROMPT"), "the thread left its channel"
    # A Slack DM is in its workspace: the team's prompt, the default model.
    assert seen(private) == ("gpt-main", "TEAM PROMPT", "per DM")
    assert seen(unmentioned) == ("gpt-backup", "TEAM PROMPT", "ohne Erwähnung")
    assert len(backup.requests) == 1
    assert len(main.requests) == 3, "the backup scope's message or QUIET's reached main"
    assert slack.thread(SUPPORT, plain["ts"]) == ["from backup"]
    assert slack.bot_texts(QUIET) == []
    shown = slack.thread(ev.CHANNEL, status["ts"])[0]
    assert f"Scope: slack:{ev.CHANNEL}" in shown
    assert "gpt-general (main)" in shown
    assert "Memory:" in shown, "the platform scope's language (en) was not applied"
    assert explained.code == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert f'system_prompt: "TEAM PROMPT" (slack:team:{ev.TEAM_ID})' in lines
    assert f"model: gpt-general (slack:{ev.CHANNEL})" in lines
    assert "provider: main (providers.default)" in lines
