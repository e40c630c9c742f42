"""Each chat platform's SDK and the Redis client are extras (`chatbridge[discord]`
…): a bot without them runs, and enabling a part whose SDK is missing is one
sentence naming the extra, exit 2, before anything is opened.

The children run with those packages hidden (`TESTS_HIDE_MODULES`, see
`tests/support/child_site/sitecustomize.py`): Python's own import blocker,
so an import of a hidden package anywhere on the path fails as it would on a
machine without it. Our code is not patched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import ChatSession, clean_env, free_port, run_cli, serve_until
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config

pytestmark = pytest.mark.slow

TELEGRAM = "telegram,telegramify_markdown"
DISCORD = "discord"
SLACK = "slack_bolt,slack_sdk,markdown_to_mrkdwn"
REDIS = "redis"


def _hide(*groups: str) -> dict[str, str]:
    return {"TESTS_HIDE_MODULES": ",".join(groups)}


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_an_enabled_platform_without_its_sdk_is_one_sentence_naming_the_extra(
    tmp_path: Path,
) -> None:
    (tmp_path / "chatbridge.yaml").write_text(
        f"platforms:\n  discord:\n    enabled: true\nserver:\n  port: {free_port()}\n"
    )
    env = {"DISCORD_BOT_TOKEN": "not-used", **_hide(DISCORD)}
    result = await run_cli("run", cwd=tmp_path, env=env)
    assert result.code == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "chatbridge: discord is enabled but discord.py is not installed: "
        "pip install 'chatbridge[discord]'"
    ]
    assert _files(tmp_path) == ["chatbridge.yaml"], "run opened the store before refusing"


async def test_the_first_missing_package_of_an_extra_is_named(tmp_path: Path) -> None:
    (tmp_path / "chatbridge.yaml").write_text(
        f"platforms:\n  slack:\n    enabled: true\nserver:\n  port: {free_port()}\n"
    )
    env = {
        "SLACK_BOT_TOKEN": "xoxb-not-used",
        "SLACK_SIGNING_SECRET": "not-used",
        **_hide("markdown_to_mrkdwn"),
    }
    result = await run_cli("run", cwd=tmp_path, env=env)
    assert result.code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        "chatbridge: slack is enabled but markdown-to-mrkdwn is not installed: "
        "pip install 'chatbridge[slack]'"
    )


async def test_the_redis_store_without_the_redis_client_is_one_sentence(tmp_path: Path) -> None:
    # A port nobody listens on: even a failed refusal could not reach a real Redis.
    (tmp_path / "chatbridge.yaml").write_text(
        f"memory:\n  backend: redis\n  url: redis://127.0.0.1:{free_port()}/0\n"
    )
    for command in (["chat"], ["memory", "show", "--user", "console:local"]):
        result = await run_cli(*command, cwd=tmp_path, env=_hide(REDIS))
        assert result.code == 2, (command, result.stderr)
        assert result.stderr.strip().splitlines() == [
            "chatbridge: memory.backend is redis but redis is not installed: "
            "pip install 'chatbridge[redis]'"
        ], command


async def test_chat_runs_with_no_optional_sdk_installed(tmp_path: Path) -> None:
    chat = await ChatSession.start(cwd=tmp_path, env=_hide(TELEGRAM, DISCORD, SLACK, REDIS))
    try:
        await chat.send("Hallo ohne Extras")
        answer = await chat.read_until("Hallo ohne Extras")
    finally:
        code, _, err = await chat.close()
    assert "Hallo ohne Extras" in answer
    assert code == 0, err
    assert "Traceback" not in err


async def test_a_telegram_only_bot_runs_without_the_other_sdks(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        write_run_config(tmp_path, port=free_port(), telegram=telegram.base_url, debug=True)
        env = clean_env({"TELEGRAM_BOT_TOKEN": telegram.token, **_hide(DISCORD, SLACK, REDIS)})

        async def answered() -> None:
            telegram.push_text(ALICE, ALICE, "Hallo nur Telegram")
            await telegram.wait_for(lambda: bool(telegram.bot_texts(ALICE)), within=30)

        code, err = await serve_until(tmp_path, env, answered)
    assert code == 0, err
    (answer,) = telegram.bot_texts(ALICE)
    assert "Hallo nur Telegram" in answer
