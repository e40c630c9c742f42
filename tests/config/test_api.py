"""Public API: path resolution, the `config check` summary, secrets and re-exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge import config
from chatbridge.config import (
    ChatbridgeConfig,
    load_config,
    load_config_text,
    resolve_config_path,
    summarize,
)
from tests.config._helpers import load_error, load_ok, render


def test_resolve_prefers_cli(tmp_path: Path) -> None:
    (tmp_path / "chatbridge.yaml").write_text("")
    env = {"CHATBRIDGE_CONFIG": "/etc/env.yaml"}
    assert resolve_config_path("cli.yaml", env, tmp_path) == tmp_path / "cli.yaml"
    assert resolve_config_path("/abs/cli.yaml", env, tmp_path) == Path("/abs/cli.yaml")


def test_resolve_then_environment(tmp_path: Path) -> None:
    (tmp_path / "chatbridge.yaml").write_text("")
    env = {"CHATBRIDGE_CONFIG": "/etc/env.yaml"}
    assert resolve_config_path(None, env, tmp_path) == Path("/etc/env.yaml")
    assert resolve_config_path("", {"CHATBRIDGE_CONFIG": "rel.yaml"}, tmp_path) == (
        tmp_path / "rel.yaml"
    )


def test_resolve_then_cwd_file_then_none(tmp_path: Path) -> None:
    assert resolve_config_path(None, {"CHATBRIDGE_CONFIG": ""}, tmp_path) is None
    (tmp_path / "chatbridge.yaml").write_text("")
    assert resolve_config_path(None, {}, tmp_path) == tmp_path / "chatbridge.yaml"


def test_explicit_missing_path_is_returned_and_fails_on_load(tmp_path: Path) -> None:
    path = resolve_config_path("missing.yaml", {}, tmp_path)
    assert path == tmp_path / "missing.yaml"
    with pytest.raises(config.ConfigError, match=r"missing\.yaml: no such file$"):
        load_config(path, {})


def test_summary_of_example_chain(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        providers:
          default: main
          fallback: [backup]
          main: {type: openai, model: gpt-5.4-mini}
          backup: {type: anthropic, model: claude-sonnet-4-6}
        platforms:
          telegram: {enabled: true, token: t}
        """,
    )
    assert summarize(cfg) == (
        "ok: providers main (openai gpt-5.4-mini) -> backup (anthropic claude-sonnet-4-6); "
        "platforms telegram; memory sqlite data/chatbridge.db"
    )


def test_summary_of_defaults() -> None:
    assert summarize(ChatbridgeConfig()) == (
        "ok: providers none configured (built-in default); "
        "platforms none (console only); memory sqlite data/chatbridge.db"
    )


def test_summary_modes_and_redacted_redis(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        providers: {solo: {type: debug}}
        memory: {backend: redis, url: "redis://user:hunter2@cache:6380/1"}
        platforms:
          telegram:
            enabled: true
            token: t
            mode: webhook
            webhook_url: https://bot.example.org/tg
            webhook_secret: abc_DEF-1
          slack: {enabled: true, bot_token: b, app_token: a}
          discord: {enabled: true, token: d}
        """,
    )
    assert summarize(cfg) == (
        "ok: providers solo (debug debug); "
        "platforms telegram (webhook), discord, slack (socket mode); "
        "memory redis redis://user:***@cache:6380/1"
    )


SECRETS = {
    "OPENAI_API_KEY": "sk-very-secret-1",
    "TG": "123456:tg-very-secret-2",
    "WH": "wh-very-secret-3",
    "SB": "xoxb-very-secret-4",
    "SS": "very-secret-5",
}
SECRET_TEXT = """
providers: {main: {type: openai, model: m, api_key: "${OPENAI_API_KEY}"}}
platforms:
  telegram:
    enabled: true
    token: ${TG}
    mode: webhook
    webhook_url: https://x.example/hook
    webhook_secret: ${WH}
  slack: {enabled: true, bot_token: "${SB}", signing_secret: "${SS}"}
"""


def test_secrets_are_hidden_in_repr_and_dumps() -> None:
    cfg = load_config_text(SECRET_TEXT, source="c.yaml", environ=SECRETS)
    shown = repr(cfg) + str(cfg) + cfg.model_dump_json() + summarize(cfg)
    for secret in SECRETS.values():
        assert secret not in shown
    assert cfg.platforms.slack.signing_secret is not None
    assert cfg.platforms.slack.signing_secret.get_secret_value() == "very-secret-5"


def test_secrets_are_not_echoed_in_errors(tmp_path: Path) -> None:
    err = load_error(tmp_path, "providers:\n  p: {type: debug, api_key: 987654321}\n")
    assert render(err) == ["FILE:2: providers.p.api_key: Input should be a valid string"]


def test_public_api_is_reexported() -> None:
    expected = {
        "ChatbridgeConfig",
        "BotConfig",
        "EngineConfig",
        "MemoryConfig",
        "ProvidersConfig",
        "ProviderConfig",
        "PlatformsConfig",
        "TelegramConfig",
        "DiscordConfig",
        "SlackConfig",
        "AccessConfig",
        "ServerConfig",
        "LoggingConfig",
        "SecretFileError",
        "env_secret",
        "Duration",
        "ConfigError",
        "ConfigIssue",
        "load_config",
        "load_config_text",
        "resolve_config_path",
        "summarize",
        "describe_store",
        "mask_url",
        "url_secrets",
        "check_user_id",
        "LIMIT_KEYS",
        "LimitValues",
        "LimitsConfig",
        "Prices",
        "parse_duration",
        "ScopeSettings",
        "TopLevel",
        "check_scope_id",
        "scope_platform",
        "top_level_of",
    }
    assert set(config.__all__) == expected
    assert all(hasattr(config, name) for name in expected)


def test_yaml_merge_keys_share_provider_settings(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        providers:
          default: a
          fallback: [b]
          a: &common {type: openai, model: m, timeout: 5s, max_tokens: 10}
          b:
            <<: *common
            model: n
        """,
    )
    b = cfg.providers.entries["b"]
    assert (b.type, b.model, b.timeout, b.max_tokens) == ("openai", "n", 5.0, 10)


def test_numeric_and_console_ids(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        access:
          allow: [telegram:-1001234, console:local, team]
          admins: [discord:42]
        identities:
          team: [slack:U0123, telegram:7]
        """,
    )
    assert cfg.access.allow == ("telegram:-1001234", "console:local", "team")
    assert cfg.identities["team"] == ("slack:U0123", "telegram:7")


def test_merge_key_lines_point_at_the_explicit_key(tmp_path: Path) -> None:
    err = load_error(
        tmp_path,
        """
        providers:
          default: a
          a: &common {type: openai, model: m, timeout: 5s}
          b:
            model: n
            timeout: never
            <<: *common
        """,
    )
    assert render(err) == [
        "FILE:7: providers.b.timeout: expected a duration like 90s, 30m or 24h, not 'never'"
    ]


def test_a_self_hosted_bot_api_may_use_a_plain_http_webhook(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        platforms:
          telegram:
            enabled: true
            token: "1:abc"
            base_url: http://127.0.0.1:8081/bot
            mode: webhook
            webhook_url: http://127.0.0.1:8080/telegram/webhook
            webhook_secret: s3cret
        """,
    )
    assert cfg.platforms.telegram.webhook_url.startswith("http://")
    assert not cfg.platforms.telegram.official_api
