"""SIGKILL while an answer streams natively, then a restart: `chatbridge run` with
the Telegram / Slack fakes and the real SDKs.

A Telegram draft is no message: the kill leaves nothing in the chat, and the
restarted bot sends the answer once (one sendMessage, never an edit). A Slack
stream is a message, recorded as soon as chat.startStream named it: the
restarted bot finishes that same message with chat.update, and posts nothing
else. Either way the answer the user sees is the one in memory.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from tests.scenarios.test_chemitek_slack import slack_yaml, wait_ready
from tests.support import fake_slack_events as ev
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import run_config_text
from tests.support.sse import Reply

ANSWER = " ".join(f"Schritt{i}" for i in range(25)) + "."  # under summary_chars


def _slow() -> Reply:
    """Streamed over seconds, so the kill lands mid-answer."""
    return Reply(text=ANSWER, chunk_chars=6, chunk_delay=0.08)


def _telegram_yaml(telegram: FakeTelegram, openai: FakeOpenAI, port: int) -> str:
    return run_config_text(
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={"telegram": {"edit_interval": "0.1s"}},
    )


async def _run(cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=cwd, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _kill(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGKILL)
    await process.wait()


async def _stop(process: asyncio.subprocess.Process) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    return err.decode()


async def _remembered(cwd: Path, env: dict[str, str], user: str) -> list[str]:
    """The ring's answers for `user`, read with `chatbridge memory show`."""
    shown = await run_cli("memory", "show", "--user", user, cwd=cwd, env=env)
    assert shown.code == 0, shown.stderr
    return [entry["assistant_summary"] for entry in json.loads(shown.stdout)]


async def test_a_draft_killed_mid_answer_leaves_nothing_and_is_sent_once_after_restart(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(_slow(), Reply(text=ANSWER, chunk_chars=6, chunk_delay=0.02))
        (tmp_path / "chatbridge.yaml").write_text(_telegram_yaml(telegram, openai, free_port()))
        env = clean_env({"TELEGRAM_BOT_TOKEN": telegram.token, "OPENAI_API_KEY": "sk-kill"})
        first = await _run(tmp_path, env)
        try:
            telegram.push_text(ALICE, ALICE, "Wie geht es weiter?")
            await telegram.wait_for(
                lambda: len(telegram.calls_to("sendMessageDraft")) >= 2, within=30
            )
        finally:
            await _kill(first)
        drafts_before = len(telegram.calls_to("sendMessageDraft"))
        assert telegram.bot_texts(ALICE) == [], "a draft is no message: nothing to clean up"
        assert not telegram.calls_to("sendMessage")

        second = await _run(tmp_path, env)
        try:
            await telegram.wait_for(lambda: telegram.bot_texts(ALICE) == [ANSWER], within=30)
        finally:
            await _stop(second)
        memory = await _remembered(tmp_path, env, f"telegram:{ALICE}")

    assert telegram.bot_texts(ALICE) == [ANSWER]
    assert len(telegram.calls_to("sendMessage")) == 1
    assert not telegram.calls_to("editMessageText")
    assert len(telegram.calls_to("sendMessageDraft")) > drafts_before, "drafted again"
    assert len(openai.requests) == 2
    assert memory == [ANSWER]


async def test_a_slack_stream_killed_mid_answer_is_finished_in_the_same_message(
    tmp_path: Path,
) -> None:
    async with FakeSlack() as slack, FakeOpenAI() as openai:
        openai.script(_slow(), Reply(text=ANSWER, chunk_chars=6, chunk_delay=0.02))
        port = free_port()
        (tmp_path / "chatbridge.yaml").write_text(slack_yaml(slack, openai, port, "socket"))
        env = clean_env({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN,
                         "OPENAI_API_KEY": "sk-kill"})  # fmt: skip
        mention = ev.app_mention("Wie geht es weiter?")
        first = await _run(tmp_path, env)
        try:
            await wait_ready(port)
            await slack.socket_event(mention)
            await slack.wait_for(lambda: len(slack.calls_to("chat.appendStream")) >= 2, 30)
        finally:
            await _kill(first)
        (partial,) = [m for m in slack.messages(ev.CHANNEL) if m.from_bot]
        assert partial.text != ANSWER, "the kill landed mid-stream"
        assert ANSWER.startswith(partial.text)

        second = await _run(tmp_path, env)
        try:
            await slack.wait_for(lambda: slack.thread(ev.CHANNEL, mention["ts"]) == [ANSWER], 30)
        finally:
            await _stop(second)
        memory = await _remembered(tmp_path, env, f"slack:{ev.USER_ID}")

    assert slack.thread(ev.CHANNEL, mention["ts"]) == [ANSWER], "one message, the whole answer"
    assert len(slack.calls_to("chat.startStream")) == 1
    assert not slack.calls_to("chat.postMessage")
    updates = slack.calls_to("chat.update")
    assert updates
    assert {c.params["ts"] for c in updates} == {partial.ts}
    assert len(slack.deliveries) == 1, "Slack never redelivered: the inbox kept it"
    assert memory == [ANSWER]
