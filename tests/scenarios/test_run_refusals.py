"""What `chatbridge run` refuses before it opens anything, as a new admin meets it.

Each refusal is one line naming the setting to change, exit 2, and leaves no
`data/` directory and no store file behind; nothing reaches a platform.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import clean_env, free_port, run_cli, serve_until
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_without_a_platform_no_data_directory_is_made(tmp_path: Path) -> None:
    result = await run_cli("run", cwd=tmp_path)
    assert result.code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no platform is enabled" in line
    assert _files(tmp_path) == [], "run created files without a platform to serve"


async def test_without_a_real_provider_run_names_what_to_set(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        write_run_config(tmp_path, port=free_port(), telegram=telegram.base_url)
        result = await run_cli("run", cwd=tmp_path, env={"TELEGRAM_BOT_TOKEN": telegram.token})
        calls = list(telegram.calls)
    assert result.code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    for named in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "type: debug"):
        assert named in line, line
    assert calls == [], "run connected to Telegram although it would answer with the debug echo"
    assert _files(tmp_path) == ["chatbridge.yaml"]


async def test_a_debug_provider_named_in_the_config_serves_on_purpose(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        write_run_config(tmp_path, port=free_port(), telegram=telegram.base_url, debug=True)

        async def answered() -> None:
            telegram.push_text(ALICE, ALICE, "Hallo Debug")
            await telegram.wait_for(lambda: bool(telegram.bot_texts(ALICE)), within=30)

        code, err = await serve_until(
            tmp_path, clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}), answered
        )
    assert code == 0, err
    (answer,) = telegram.bot_texts(ALICE)
    assert "[system]" in answer
    assert "Hallo Debug" in answer


async def test_an_api_key_in_the_environment_is_a_real_provider(tmp_path: Path) -> None:
    """The refusal is about the debug fallback only: a key lets run start (and
    here fail later, at Telegram, which proves it got past the check)."""
    async with FakeTelegram() as telegram:
        write_run_config(tmp_path, port=free_port(), telegram=telegram.base_url)
        env = {"TELEGRAM_BOT_TOKEN": "123:wrong-token", "ANTHROPIC_API_KEY": "sk-ant-test"}
        result = await run_cli("run", cwd=tmp_path, env=env)
    assert result.code == 1, result.stderr
    assert "telegram rejected the bot token" in result.stderr
