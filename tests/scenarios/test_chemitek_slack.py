"""The seed's story on Slack, end to end: `chatbridge run` in a child process,
in Socket Mode and in HTTP Events mode, with the Slack and OpenAI fakes.

A DM asks about the parcel, the session expires, "Soll Mittwoch kommen" is
still understood (bridged from the ring). Then the same in a channel: a
mention answered in its thread, expiry, a follow-up in that thread without a
mention, understood from the group's own entry and never from the DM's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from tests.support import fake_slack_events as ev
from tests.support.chemitek import FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.run_config import run_config_text
from tests.support.sse import Reply
from tests.support.story_run import remembered, stopped

SECRET = "chemitek-signing-secret"


def slack_yaml(slack: FakeSlack, openai: FakeOpenAI, port: int, mode: str, db: str = "") -> str:
    token = {"app_token": "${SLACK_APP_TOKEN}"} if mode == "socket" else {"signing_secret": SECRET}
    return run_config_text(
        port=port,
        openai=openai.base_url,
        allow=(f"slack:{ev.USER_ID}",),
        engine={"session_ttl": "1s"},
        **({"memory": {"path": db}} if db else {}),
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={
            "slack": {
                "enabled": True,
                "bot_token": "${SLACK_BOT_TOKEN}",
                **token,
                "base_url": slack.base_url,
                "edit_interval": "0.2s",
            }
        },
    )


async def wait_ready(port: int, within: float = 30.0) -> None:
    """Until `/readyz` answers 200 (every platform connected)."""
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("chatbridge run never became ready")
            await asyncio.sleep(0.1)


async def deliver(slack: FakeSlack, mode: str, port: int, event: dict) -> None:
    if mode == "socket":
        await slack.socket_event(event)
    else:
        url = f"http://127.0.0.1:{port}/slack/events"
        status, body, _ = await slack.post_event(url, event, signing_secret=SECRET)
        assert status == 200, body


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_chemitek_story_on_slack_through_chatbridge_run(tmp_path: Path, mode: str) -> None:
    async with FakeSlack() as slack, FakeOpenAI(chunk_chars=12) as openai:
        openai.script(*[Reply(text=chemitek_model) for _ in range(4)])
        port = free_port()
        (tmp_path / "chatbridge.yaml").write_text(slack_yaml(slack, openai, port, mode))
        env = clean_env({"SLACK_BOT_TOKEN": BOT_TOKEN, "OPENAI_API_KEY": "sk-e2e-slack"})
        if mode == "socket":
            env["SLACK_APP_TOKEN"] = APP_TOKEN
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await wait_ready(port)
            dm = ev.DM_CHANNEL
            await deliver(slack, mode, port, ev.dm_message(FIRST))
            await slack.wait_for(lambda: TRACKING in slack.bot_texts(dm), within=20)
            await asyncio.sleep(1.3)  # the 1 s session expires
            await deliver(slack, mode, port, ev.dm_message(SECOND))
            await slack.wait_for(lambda: UNDERSTOOD in slack.bot_texts(dm), within=20)

            mention = ev.app_mention(FIRST)
            root = mention["ts"]
            await deliver(slack, mode, port, mention)
            await slack.wait_for(lambda: slack.thread(ev.CHANNEL, root) == [TRACKING], 20)
            await asyncio.sleep(1.3)
            await deliver(slack, mode, port, ev.channel_message(SECOND, thread_ts=root))
            await slack.wait_for(lambda: len(slack.thread(ev.CHANNEL, root)) == 2, 20)
            memory = await remembered(tmp_path, env, f"slack:{ev.USER_ID}", slack.wait_for)
        finally:
            ran = await stopped(process)

    ran.assert_clean(BOT_TOKEN)
    assert slack.bot_texts(ev.DM_CHANNEL) == [TRACKING, UNDERSTOOD]
    assert all(m.thread_ts is None for m in slack.messages(ev.DM_CHANNEL))
    assert slack.thread(ev.CHANNEL, root) == [TRACKING, UNDERSTOOD]
    assert not [m for m in slack.messages(ev.CHANNEL) if m.from_bot and m.thread_ts != root]
    bridged_dm = openai.requests[1].body["messages"][-1]["content"]
    assert bridged_dm.startswith("<conversation_history>")
    assert bridged_dm.endswith(f"Aktuelle Nachricht: {SECOND}")
    bridged_group = openai.requests[3].body["messages"][-1]["content"]
    assert bridged_group.count(f"User: {FIRST}") == 1, "only the group's own entry is bridged"
    assert len(openai.requests) == 4
    assert memory == [FIRST, SECOND] * 2
