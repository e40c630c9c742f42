"""Broken configs: every issue carries FILE:LINE: key.path and a message an admin can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config import ConfigError, ConfigIssue, load_config
from tests.config._helpers import load_error, render

BROKEN = [
    pytest.param(
        "bot:\n  language: de\n   timezone: UTC\n",
        "FILE:3: yaml: mapping values are not allowed here",
        id="yaml-syntax",
    ),
    pytest.param(
        "memory:\n  max_entires: 3\n",
        "FILE:2: memory.max_entires: unknown key; did you mean 'max_entries'?",
        id="typo-key",
    ),
    pytest.param(
        "memroy:\n  max_entries: 3\n",
        "FILE:1: memroy: unknown key; did you mean 'memory'?",
        id="typo-section",
    ),
    pytest.param(
        "server:\n  port: eighty\n",
        "FILE:2: server.port: Input should be a valid integer, "
        "unable to parse string as an integer (got 'eighty')",
        id="wrong-type",
    ),
    pytest.param(
        "engine:\n  on_new_message: drop\n",
        "FILE:2: engine.on_new_message: Input should be 'queue' or 'cancel' (got 'drop')",
        id="bad-enum",
    ),
    pytest.param(
        "engine:\n  shutdown_grace: -10s\n",
        "FILE:2: engine.shutdown_grace: expected a duration like 90s, 30m or 24h; "
        "a duration cannot be negative",
        id="negative-duration",
    ),
    pytest.param(
        "providers:\n  main:\n    type: openai\n",
        "FILE:2: providers.main.model: required for type openai",
        id="openai-without-model",
    ),
    pytest.param(
        "providers:\n  main:\n    type: gemini\n    model: x\n",
        "FILE:3: providers.main.type: Input should be 'openai', 'anthropic' or 'debug' "
        "(got 'gemini')",
        id="unknown-provider-type",
    ),
    pytest.param(
        "providers:\n  main:\n    model: x\n",
        "FILE:2: providers.main.type: required key is missing",
        id="provider-without-type",
    ),
    pytest.param(
        "providers:\n  default: mian\n  main: {type: debug}\n",
        "FILE:2: providers.default: no provider named 'mian'; did you mean 'main'? (known: main)",
        id="default-missing-provider",
    ),
    pytest.param(
        "providers:\n  default: main\n  fallback: [backpu]\n  main: {type: debug}\n"
        "  backup: {type: debug}\n",
        "FILE:3: providers.fallback[0]: no provider named 'backpu'; did you mean 'backup'? "
        "(known: main, backup)",
        id="fallback-missing-provider",
    ),
    pytest.param(
        "providers:\n  default: main\n  fallback:\n    - backup\n    - main\n"
        "  main: {type: debug}\n  backup: {type: debug}\n",
        "FILE:5: providers.fallback[1]: provider 'main' is already in the chain",
        id="fallback-repeats-default",
    ),
    pytest.param(
        "providers:\n  a: {type: debug}\n  b: {type: debug}\n",
        "FILE:1: providers.default: required with several providers: one of a, b",
        id="several-providers-no-default",
    ),
    pytest.param(
        "providers:\n  p:\n    type: openai\n    model: m\n    base_url: localhost:8000\n",
        "FILE:5: providers.p.base_url: expected an http(s):// URL, got 'localhost:8000'",
        id="provider-base-url-scheme",
    ),
    pytest.param(
        "providers:\n  defualt: main\n  main: {type: debug}\n",
        "FILE:2: providers.defualt: unknown key; did you mean 'default'?",
        id="typo-reserved-provider-key",
    ),
    pytest.param(
        "platforms:\n  telegram:\n    enabled: true\n    token: ''\n",
        "FILE:4: platforms.telegram.token: required when telegram is enabled",
        id="telegram-without-token",
    ),
    pytest.param(
        "platforms:\n  telegram:\n    enabled: true\n",
        "FILE:2: platforms.telegram.token: environment variable TELEGRAM_BOT_TOKEN is not set",
        id="telegram-without-token-or-env",
    ),
    pytest.param(
        "platforms:\n  telegram:\n    enabled: true\n    token: t\n    mode: webhook\n"
        "    webhook_secret: s3cret\n",
        "FILE:2: platforms.telegram.webhook_url: required in webhook mode",
        id="webhook-without-url",
    ),
    pytest.param(
        "platforms:\n  slack:\n    enabled: true\n    bot_token: x\n",
        "FILE:2: platforms.slack.app_token: set app_token (Socket Mode) "
        "or signing_secret (HTTP mode)",
        id="slack-without-mode",
    ),
    pytest.param(
        "access:\n  allow:\n    - telegram:1\n    - tg:5\n",
        "FILE:4: access.allow[1]: unknown platform 'tg' in 'tg:5'; "
        "use one of telegram, discord, slack or console",
        id="bad-access-platform",
    ),
    pytest.param(
        "access:\n  admins: [telegram:@alice]\n",
        "FILE:2: access.admins[0]: telegram IDs are numbers, not names: got 'telegram:@alice'",
        id="telegram-username",
    ),
    pytest.param(
        "access:\n  allow: [alcie]\nidentities:\n  alice: [telegram:1]\n",
        "FILE:2: access.allow[0]: no identity named 'alcie'; did you mean 'alice'?",
        id="unknown-identity",
    ),
    pytest.param(
        "identities:\n  alice:\n    - slack\n",
        "FILE:3: identities.alice[0]: expected platform:id like telegram:579304651 "
        "or slack:U0123, got 'slack'",
        id="bad-identity-member",
    ),
    pytest.param(
        "identities:\n  alice: [slack:U1]\n  bob: [slack:U1]\n",
        "FILE:3: identities.bob[0]: slack:U1 already belongs to identity 'alice'",
        id="shared-identity-member",
    ),
    pytest.param(
        "memory:\n  max_entries: 3\n  inject_entries: 4\n",
        "FILE:3: memory.inject_entries: must be <= max_entries (3), got 4",
        id="inject-over-max",
    ),
    pytest.param(
        "- bot\n- engine\n",
        "FILE:1: the top level must be a mapping of sections (bot, engine, memory, "
        "providers, platforms, access, identities, server, logging, scopes, media, limits), "
        "got a list",
        id="top-level-list",
    ),
    pytest.param(
        "bot:\n  timezone: Europe/Berln\n",
        "FILE:2: bot.timezone: unknown time zone 'Europe/Berln' "
        "(use an IANA name like Europe/Berlin); did you mean 'Europe/Berlin'?",
        id="bad-timezone",
    ),
    pytest.param(
        "server:\n  port: 65536\n",
        "FILE:2: server.port: Input should be less than or equal to 65535 (got 65536)",
        id="port-out-of-range",
    ),
    pytest.param(
        "engine:\n  session_max_turns: 1\n",
        "FILE:2: engine.session_max_turns: Input should be greater than or equal to 2 (got 1)",
        id="too-few-turns",
    ),
    pytest.param(
        "engine:\n  session_max_tokens: 99\n",
        "FILE:2: engine.session_max_tokens: Input should be greater than or equal to 100 (got 99)",
        id="too-few-tokens",
    ),
    pytest.param(
        "bot:\n  language: de\nbot:\n  language: en\n",
        "FILE:3: bot: duplicate key (first on line 1)",
        id="duplicate-key",
    ),
    pytest.param(
        "platforms:\n  telegram: yes\n",
        "FILE:2: platforms.telegram: expected a mapping, got a bool",
        id="section-not-mapping",
    ),
    pytest.param(
        "identities:\n  alice: telegram:1\n",
        "FILE:2: identities.alice: expected a list, got str 'telegram:1'",
        id="identity-not-list",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BROKEN)
def test_broken_config(tmp_path: Path, text: str, expected: str) -> None:
    err = load_error(tmp_path, text)
    assert render(err) == [expected]
    assert str(err) == str(err.issues[0])


def test_enough_distinct_broken_configs() -> None:
    assert len({param.values[0] for param in BROKEN}) >= 14


def test_all_errors_in_one_file_are_reported(tmp_path: Path) -> None:
    err = load_error(
        tmp_path,
        """
        bot:
          language: fr
        engine:
          session_ttl: 1 fortnight
        memory:
          max_entires: 10
        providers:
          default: nope
          main: {type: debug}
        server:
          port: -1
        """,
    )
    assert render(err) == [
        "FILE:3: bot.language: Input should be 'de' or 'en' (got 'fr')",
        "FILE:5: engine.session_ttl: expected a duration like 90s, 30m or 24h, not '1 fortnight'",
        "FILE:7: memory.max_entires: unknown key; did you mean 'max_entries'?",
        "FILE:9: providers.default: no provider named 'nope' (known: main)",
        "FILE:12: server.port: Input should be greater than or equal to 0 (got -1)",
    ]


def test_webhook_reports_url_and_secret_together(tmp_path: Path) -> None:
    err = load_error(
        tmp_path,
        "platforms:\n  telegram:\n    enabled: true\n    token: t\n    mode: webhook\n"
        "    webhook_url: http://example.org/hook\n    webhook_secret: 'no spaces!'\n",
    )
    assert render(err) == [
        "FILE:6: platforms.telegram.webhook_url: Telegram only posts to https:// URLs",
        "FILE:7: platforms.telegram.webhook_secret: "
        "use 1-256 characters from A-Z, a-z, 0-9, '_' and '-'",
    ]


def test_unknown_key_without_close_match_lists_allowed(tmp_path: Path) -> None:
    err = load_error(tmp_path, "server:\n  listen: 1\n")
    assert render(err) == ["FILE:2: server.listen: unknown key; expected one of: host, port"]


def test_unknown_key_inside_provider_entry(tmp_path: Path) -> None:
    err = load_error(tmp_path, "providers:\n  p:\n    type: debug\n    max_token: 5\n")
    assert render(err) == ["FILE:4: providers.p.max_token: unknown key; did you mean 'max_tokens'?"]


def test_unknown_yaml_tag(tmp_path: Path) -> None:
    err = load_error(tmp_path, "bot:\n  language: !lang de\n")
    assert render(err) == [
        "FILE:2: bot.language: could not determine a constructor for the tag '!lang'"
    ]


def test_scalar_top_level(tmp_path: Path) -> None:
    err = load_error(tmp_path, "123456:AAHsecret\n")
    assert render(err)[0].endswith("got a str")  # never the value: it may be a pasted token
    assert "AAHsecret" not in str(err)
    assert render(err)[0].startswith("FILE:1: the top level must be a mapping")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert str(info.value) == f"{path}: no such file"
    assert info.value.issues == [
        ConfigIssue(file=str(path), line=None, path="", message="no such file")
    ]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path, {})


def test_real_file_name_in_messages(tmp_path: Path) -> None:
    err = load_error(tmp_path, "server:\n  port: x\n")
    assert str(err).startswith(f"{tmp_path / 'chatbridge.yaml'}:2: server.port: ")


def test_issue_formatting() -> None:
    def issue(line: int | None, path: str, message: str, file: str = "a.yaml") -> ConfigIssue:
        return ConfigIssue(file=file, line=line, path=path, message=message)

    assert str(issue(3, "bot.language", "bad")) == "a.yaml:3: bot.language: bad"
    assert str(issue(None, "bot", "bad")) == "a.yaml: bot: bad"
    assert str(issue(None, "", "no such file")) == "a.yaml: no such file"
    err = ConfigError([issue(1, "x", "m", "a"), issue(2, "y", "n", "a")])
    assert str(err) == "a:1: x: m\na:2: y: n"


def test_a_token_pasted_in_place_of_a_section_is_not_echoed(tmp_path: Path) -> None:
    error = load_error(tmp_path, "platforms:\n  telegram: '123456:AAHsecretTokenValue'\n")
    assert render(error) == ["FILE:2: platforms.telegram: expected a mapping, got a str"]
    assert "AAHsecret" not in str(error)
