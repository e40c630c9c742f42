"""SIGKILL right after the ack: the restarted `chatbridge run` answers, once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.scenarios.test_chemitek_slack import slack_yaml, wait_ready
from tests.support import fake_slack_events as ev
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.sse import Reply

ANSWER = "Das Paket kommt am Mittwoch."


async def _run(cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=cwd, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_an_event_acked_before_a_crash_is_answered_after_the_restart(
    tmp_path: Path,
) -> None:
    async with FakeSlack() as slack, FakeOpenAI(chunk_chars=8) as openai:
        # The first attempt hangs in the model until the process is killed.
        openai.script(Reply(text=ANSWER, first_chunk_delay=3.0), Reply(text=ANSWER))
        port = free_port()
        config = slack_yaml(slack, openai, port, "socket")
        (tmp_path / "chatbridge.yaml").write_text(config)
        env = clean_env({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN,
                         "OPENAI_API_KEY": "sk-restart"})  # fmt: skip
        first = await _run(tmp_path, env)
        try:
            await wait_ready(port)
            delivery = await slack.socket_event(ev.dm_message("Wo bleibt das Paket?"))
            assert delivery.acked_at is not None
            await slack.wait_for(lambda: openai.requests, within=10)
        finally:
            first.send_signal(signal.SIGKILL)
            await first.wait()
        assert slack.bot_texts(ev.DM_CHANNEL) == [], "answered before the crash"

        second = await _run(tmp_path, env)
        try:
            await slack.wait_for(lambda: ANSWER in slack.bot_texts(ev.DM_CHANNEL), within=20)
        finally:
            second.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(second.communicate(), 20)
    assert second.returncode == 0, err.decode()
    assert slack.bot_texts(ev.DM_CHANNEL) == [ANSWER]
    assert len(slack.deliveries) == 1, "Slack never redelivered: the inbox kept it"
