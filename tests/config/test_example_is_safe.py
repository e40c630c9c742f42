"""The example config, copied as a new admin copies it, lets nobody in.

Issue 18's trap: the example allowed and made admin a real-looking Telegram
ID, and with only `platforms.telegram.enabled: true` set, `run` answered that
ID with the `debug` provider, which echoes the system prompt and the history.
"""

from __future__ import annotations

import re
from pathlib import Path

from chatbridge import config as config_package
from chatbridge.config import ChatbridgeConfig, load_config
from chatbridge.core.app.cli import main
from chatbridge.core.app.wiring import access_from_config
from chatbridge.core.models import ChatKind, Conversation
from tests.support.cli import run_cli
from tests.support.fake_telegram import FakeTelegram

EXAMPLE = Path(config_package.__file__).parent / "chatbridge.example.yaml"
TELEGRAM_ON = ("    enabled: false          # connect to Telegram", "    enabled: true")


def _copied(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = EXAMPLE.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, f"the example no longer has {old!r}"
        text = text.replace(old, new)
    path = tmp_path / "chatbridge.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_id_in_the_example_could_be_a_real_account() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    numeric = re.findall(r"\b(?:telegram|discord):-?\d+", text)
    assert numeric == [], f"real-looking IDs in the example: {numeric}"


def test_with_only_telegram_enabled_nobody_is_allowed_or_admin(tmp_path: Path) -> None:
    path = _copied(tmp_path, TELEGRAM_ON)
    assert main(["config", "check", "--config", str(path)], {"TELEGRAM_BOT_TOKEN": "1:x"}) == 0
    config = load_config(path, {"TELEGRAM_BOT_TOKEN": "1:x"})
    assert config.platforms.enabled == ("telegram",)
    assert (config.access.allow, config.access.admins, config.identities) == ((), (), {})
    access = access_from_config(config)
    for user in ("579304651", "1", "123456789"):
        conversation = Conversation(
            platform="telegram", chat=user, user=user, kind=ChatKind.PRIVATE
        )
        # Admins are always allowed, so this covers them too.
        assert not access.allowed(conversation), f"telegram:{user} is let in"


def test_every_value_set_in_the_example_is_the_default() -> None:
    """What the header promises: only commented-out lines are examples."""
    loaded = load_config(EXAMPLE, {})
    defaults = ChatbridgeConfig()
    # memory.path is the default too, anchored at the file's directory when written.
    anchored = defaults.memory.model_copy(
        update={"path": str(EXAMPLE.parent / "data/chatbridge.db")}
    )
    assert loaded.memory == anchored
    assert loaded.model_copy(update={"memory": defaults.memory}) == defaults


async def test_run_on_the_copied_example_never_echoes_prompts_to_telegram(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram:
        base_url = "    base_url: https://api.telegram.org/bot"
        _copied(tmp_path, TELEGRAM_ON, (base_url, f"    base_url: {telegram.base_url}"))
        result = await run_cli("run", cwd=tmp_path, env={"TELEGRAM_BOT_TOKEN": telegram.token})
        calls = list(telegram.calls)
    assert result.code == 2, result.stderr
    assert "no model provider" in result.stderr
    assert calls == []
