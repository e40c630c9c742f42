"""Defaults: no file, an empty file and `section:` with nothing below all mean the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from chatbridge import config
from chatbridge.config import (
    ChatbridgeConfig,
    DiscordConfig,
    ProviderConfig,
    SlackConfig,
    TelegramConfig,
    load_config,
    load_config_text,
)
from tests.config._helpers import load_ok

EXAMPLE = Path(config.__file__).parent / "chatbridge.example.yaml"


def test_builtin_defaults() -> None:
    cfg = load_config(None, {})
    assert cfg.bot.system_prompt == "You are a helpful assistant."
    assert (cfg.bot.language, cfg.bot.timezone) == ("de", "")
    assert (cfg.engine.session_ttl, cfg.engine.session_max_turns) == (1800.0, 40)
    assert cfg.engine.session_max_tokens == 3000
    assert (cfg.engine.on_new_message, cfg.engine.shutdown_grace) == ("queue", 10.0)
    mem = cfg.memory
    assert (mem.backend, mem.path, mem.url) == (
        "sqlite",
        "data/chatbridge.db",
        "redis://127.0.0.1:6379/0",
    )
    assert (mem.max_entries, mem.max_age, mem.user_chars) == (20, 86400.0, 500)
    assert (mem.summary_chars, mem.inject_entries) == (300, 5)
    assert cfg.providers.default is None
    assert cfg.providers.fallback == ()
    assert cfg.providers.entries == {}
    tg = cfg.platforms.telegram
    assert (tg.enabled, tg.token, tg.mode) == (False, None, "polling")
    assert (tg.base_url, tg.webhook_url, tg.webhook_secret) == (
        "https://api.telegram.org/bot",
        "",
        None,
    )
    assert tg.edit_interval == 1.0
    assert (cfg.platforms.discord.enabled, cfg.platforms.discord.token) == (False, None)
    slack = cfg.platforms.slack
    assert (slack.enabled, slack.bot_token, slack.app_token, slack.signing_secret) == (
        False,
        None,
        None,
        None,
    )
    assert slack.base_url == "https://slack.com/api/"
    assert (cfg.access.allow, cfg.access.admins) == ((), ())
    assert cfg.identities == {}
    assert (cfg.server.host, cfg.server.port) == ("127.0.0.1", 8080)


@pytest.mark.parametrize("text", ["", "\n", "# nothing configured yet\n", "---\n"])
def test_empty_file_is_all_defaults(text: str) -> None:
    assert load_config_text(text, source="x.yaml", environ={}) == load_config(None, {})


def test_empty_sections_mean_defaults(tmp_path: Path) -> None:
    cfg = load_ok(tmp_path, "bot:\nmemory:\nplatforms:\n  telegram:\naccess:\n  allow:\n")
    assert cfg == load_config(None, {})


def test_defaults_equal_model_construction() -> None:
    assert load_config(None, {}) == ChatbridgeConfig()


def test_models_are_frozen() -> None:
    cfg = load_config(None, {})
    with pytest.raises(ValidationError, match="frozen"):
        cfg.server.port = 1


def test_debug_provider_defaults(tmp_path: Path) -> None:
    cfg = load_ok(tmp_path, "providers:\n  dev:\n    type: debug\n")
    dev = cfg.providers.entries["dev"]
    assert (dev.model, dev.api_key, dev.base_url) == ("debug", None, None)
    assert (dev.timeout, dev.max_retries, dev.max_tokens) == (60.0, 2, 1024)
    assert cfg.providers.chain == ("dev",)
    assert cfg.providers.default == "dev"


def test_base_url_unset_means_sdk_default(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        providers:
          default: a
          fallback: [b, c]
          a: {type: openai, model: m}
          b: {type: anthropic, model: n, base_url: ""}
          c: {type: openai, model: local, base_url: "http://localhost:11434/v1"}
        """,
    )
    entries = cfg.providers.entries
    assert (entries["a"].base_url, entries["b"].base_url) == (None, None)
    assert entries["c"].base_url == "http://localhost:11434/v1"
    assert cfg.providers.chain == ("a", "b", "c")


def test_sole_entry_becomes_default(tmp_path: Path) -> None:
    cfg = load_ok(tmp_path, "providers:\n  only: {type: debug}\n  fallback: []\n")
    assert cfg.providers.default == "only"
    assert cfg.providers.chain == ("only",)


def test_every_field_documented() -> None:
    models = [getattr(config, name) for name in config.__all__ if name.endswith("Config")]
    assert len(models) == 14
    for model in models:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


_COMMENTED_KEY = re.compile(r"^  # ( *[a-z_]+:(?: |$).*)$")


def _example_with_providers() -> str:
    """The example with its commented-out provider entries switched on."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    start, end = lines.index("providers:"), lines.index("platforms:")
    block = [
        "  " + match.group(1)
        for line in lines[start + 1 : end]
        if (match := _COMMENTED_KEY.match(line))
    ]
    return "\n".join([*lines[: start + 1], *block, *lines[end:]]) + "\n"


def test_example_file_validates_with_no_environment_at_all() -> None:
    cfg = load_config(EXAMPLE, {})
    assert cfg.providers.entries == {}  # chosen by API key, else debug
    assert cfg.platforms.enabled == ()
    # Nobody but the console until the admin writes an ID (issue 18: no real-looking admin).
    assert cfg.identities == {}
    assert (cfg.access.allow, cfg.access.admins) == ((), ())
    defaults = ChatbridgeConfig().memory
    assert cfg.memory == defaults.model_copy(update={"path": str(EXAMPLE.parent / defaults.path)})
    assert cfg.engine == ChatbridgeConfig().engine


def test_example_provider_block_uncommented_validates(tmp_path: Path) -> None:
    secret = tmp_path / "anthropic"
    secret.write_text("ak-test\n")
    text = _example_with_providers().replace("/run/secrets/anthropic", str(secret))
    cfg = load_config_text(text, source="x.yaml", environ={"OPENAI_API_KEY": "sk-test"})
    entries = cfg.providers.entries
    assert list(entries) == ["main", "backup"]
    assert entries["main"].api_key is not None
    assert entries["main"].api_key.get_secret_value() == "sk-test"
    assert entries["main"].base_url is None
    assert entries["backup"].api_key is not None
    assert entries["backup"].api_key.get_secret_value() == "ak-test"
    assert cfg.providers.chain == ("main", "backup")


def test_example_file_documents_every_key() -> None:
    text = _example_with_providers()
    data = yaml.safe_load(text)
    assert set(data) == set(ChatbridgeConfig.model_fields)
    for section in ("bot", "engine", "memory", "access", "server"):
        model = ChatbridgeConfig.model_fields[section].annotation
        assert model is not None
        assert set(data[section]) == set(model.model_fields), section
    for name, platform in (("telegram", TelegramConfig), ("discord", DiscordConfig)):
        assert set(data["platforms"][name]) == set(platform.model_fields)
    # The Slack mode keys are documented commented out: setting either one in
    # the file would decide the mode, which the environment decides otherwise.
    mode_keys = {"app_token", "signing_secret"}
    assert set(data["platforms"]["slack"]) == set(SlackConfig.model_fields) - mode_keys
    for key in mode_keys:
        assert re.search(rf"^\s+# {key}: \$\{{SLACK_", text, re.M), key
    assert set(data["providers"]["main"]) == set(ProviderConfig.model_fields)
    for line in text.splitlines():
        value_line = line.strip() and not line.lstrip().startswith("#")
        if value_line and not line.rstrip().endswith(":"):
            assert "#" in line, f"no comment on {line!r}"


def test_example_provider_entries_need_referenced_keys_only() -> None:
    err_text = ""
    try:
        load_config_text(_example_with_providers(), source="x.yaml", environ={})
    except config.ConfigError as err:
        err_text = str(err)
    assert "OPENAI_API_KEY" in err_text
    assert "TELEGRAM_BOT_TOKEN" not in err_text
