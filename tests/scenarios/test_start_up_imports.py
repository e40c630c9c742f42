"""What `chatbridge run` imports: nothing a disabled platform or an unused
provider needs, and before the first Telegram poll nothing that can wait.

The real CLI in a child process under `python -X importtime`, which lists
every module as it is imported; against the fake Bot API and the fake OpenAI.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config

pytestmark = pytest.mark.timeout(90)

OTHER_SDKS = {"discord", "slack_bolt", "slack_sdk", "redis", "anthropic", "markdown_to_mrkdwn"}
CAN_WAIT = {"aiohttp", "openai", "telegramify_markdown"}


def _config(telegram: FakeTelegram, openai_url: str, tmp_path: Path) -> Path:
    return write_run_config(
        tmp_path,
        port=free_port(),
        telegram=telegram.base_url,
        openai=openai_url,
        platforms={"telegram": {"token": telegram.token}},
        memory={"path": str(tmp_path / "s.db")},
    )


async def _run(config: Path, log: Path) -> asyncio.subprocess.Process:
    with log.open("w") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-X", "importtime", "-m", "chatbridge", "run", "--config",
            str(config), env=clean_env(), stdout=asyncio.subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


def _packages(log: Path) -> set[str]:
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in log.read_text().splitlines()
        if line.startswith("import time:") and "[us]" not in line
    }


async def test_nothing_that_can_wait_is_imported_before_the_first_poll(tmp_path: Path) -> None:
    # deleteWebhook is the last call before polling starts; refusing it stops
    # the run right there, so the log holds exactly what came before the poll.
    async with FakeTelegram() as telegram:
        telegram.forget_method("deleteWebhook")
        log = tmp_path / "importtime.txt"
        process = await _run(_config(telegram, "http://127.0.0.1:9/v1", tmp_path), log)
        assert await asyncio.wait_for(process.wait(), 60) == 1
        assert telegram.calls_to("deleteWebhook")
        assert not telegram.calls_to("getUpdates")
    imported = _packages(log)
    assert {"telegram", "pydantic", "yaml"} <= imported, "the log covers the start-up"
    assert not imported & (OTHER_SDKS | CAN_WAIT)


async def test_a_telegram_run_never_imports_what_it_does_not_use(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI(default_text="**Mittwoch**.") as openai:
        telegram.push_text(ALICE, ALICE, "Wann kommt das Paket?")
        log = tmp_path / "importtime.txt"
        process = await _run(_config(telegram, openai.base_url, tmp_path), log)
        try:
            await telegram.wait_for(lambda: bool(telegram.bot_texts(ALICE)), within=60)
        finally:
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 0
    assert telegram.bot_texts(ALICE) == ["Mittwoch."]
    imported = _packages(log)
    assert CAN_WAIT <= imported, "what waited was imported once needed"
    assert not imported & OTHER_SDKS
