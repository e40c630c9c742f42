"""`${VAR}` substitution: present, missing, defaults, and the disabled-section exemption."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config import ConfigError, load_config_text
from tests.config._helpers import load_error, load_ok, render

TELEGRAM_ON = """
platforms:
  telegram:
    enabled: true
    token: ${TG}
"""


def test_present_variable(tmp_path: Path) -> None:
    cfg = load_ok(tmp_path, TELEGRAM_ON, environ={"TG": "123:abc"})
    assert cfg.platforms.telegram.token is not None
    assert cfg.platforms.telegram.token.get_secret_value() == "123:abc"


def test_missing_variable_names_it(tmp_path: Path) -> None:
    err = load_error(tmp_path, TELEGRAM_ON)
    assert render(err) == ["FILE:5: platforms.telegram.token: environment variable TG is not set"]


def test_empty_variable_counts_as_unset_for_required_secret(tmp_path: Path) -> None:
    err = load_error(tmp_path, TELEGRAM_ON, environ={"TG": ""})
    assert render(err) == ["FILE:5: platforms.telegram.token: environment variable TG is not set"]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "You are Bob."),
        ({"NAME": ""}, "You are Bob."),
        ({"NAME": "Ann"}, "You are Ann."),
    ],
)
def test_default_value(environ: dict[str, str], expected: str) -> None:
    text = 'bot: {system_prompt: "You are ${NAME:-Bob}."}'
    cfg = load_config_text(text, source="c.yaml", environ=environ)
    assert cfg.bot.system_prompt == expected


def test_several_references_and_escape() -> None:
    text = 'bot: {system_prompt: "${A}-${B:-} costs $$5 and $HOME stays"}'
    cfg = load_config_text(text, source="c.yaml", environ={"A": "x"})
    assert cfg.bot.system_prompt == "x- costs $5 and $HOME stays"


def test_substituted_strings_are_coerced() -> None:
    text = "server: {port: '${PORT:-9000}'}\nengine: {session_ttl: '${TTL}'}"
    cfg = load_config_text(text, source="c.yaml", environ={"TTL": "5m"})
    assert (cfg.server.port, cfg.engine.session_ttl) == (9000, 300.0)


def test_malformed_reference(tmp_path: Path) -> None:
    err = load_error(tmp_path, 'bot:\n  system_prompt: "hi ${oops"\n')
    assert render(err) == [
        "FILE:2: bot.system_prompt: malformed ${...}: use ${NAME} or ${NAME:-default} ($$ for '$')"
    ]


def test_missing_in_disabled_platform_is_fine(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        platforms:
          telegram: {enabled: false, token: "${TG}", webhook_secret: "${S}"}
          discord: {token: "${DC}"}
          slack: {bot_token: "${SB}", app_token: "${SA}"}
        """,
    )
    assert cfg.platforms.telegram.token is None
    assert cfg.platforms.discord.token is None
    assert cfg.platforms.slack.app_token is None


def test_missing_enabled_flag_is_always_an_error(tmp_path: Path) -> None:
    err = load_error(tmp_path, "platforms:\n  discord:\n    enabled: ${DISCORD_ON}\n")
    assert render(err) == [
        "FILE:3: platforms.discord.enabled: environment variable DISCORD_ON is not set"
    ]


def test_enabled_from_variable(tmp_path: Path) -> None:
    text = "platforms:\n  discord:\n    enabled: ${DISCORD_ON:-false}\n    token: ${DC}\n"
    assert not load_ok(tmp_path, text).platforms.discord.enabled
    err = load_error(tmp_path, text, environ={"DISCORD_ON": "yes"})
    assert render(err) == ["FILE:4: platforms.discord.token: environment variable DC is not set"]


def test_platform_tokens_default_to_conventional_variables(tmp_path: Path) -> None:
    text = "platforms:\n  discord:\n    enabled: true\n  slack:\n    enabled: true\n"
    env = {"DISCORD_BOT_TOKEN": "d", "SLACK_BOT_TOKEN": "b", "SLACK_SIGNING_SECRET": "s"}
    cfg = load_ok(tmp_path, text, environ=env)
    assert cfg.platforms.discord.token is not None
    assert cfg.platforms.discord.token.get_secret_value() == "d"
    assert cfg.platforms.slack.signing_secret is not None
    assert cfg.platforms.slack.app_token is None
    assert not cfg.platforms.slack.socket_mode


def test_only_referenced_providers_need_their_variables(tmp_path: Path) -> None:
    text = """
    providers:
      default: a
      a: {type: openai, model: m, api_key: "${KEY_A}"}
      b: {type: anthropic, model: n, api_key: "${KEY_B}"}
      c: {type: anthropic, model: n, api_key: "${KEY_C}"}
    """
    cfg = load_ok(tmp_path, text, environ={"KEY_A": "a"})
    assert cfg.providers.entries["b"].api_key is None
    err = load_error(tmp_path, text.replace("default: a", "default: a\n      fallback: [c]"))
    assert render(err) == [
        "FILE:5: providers.a.api_key: environment variable KEY_A is not set",
        "FILE:7: providers.c.api_key: environment variable KEY_C is not set",
    ]


def test_single_provider_entry_counts_as_referenced(tmp_path: Path) -> None:
    err = load_error(tmp_path, 'providers:\n  solo: {type: openai, model: "${MODEL}"}\n')
    assert render(err) == ["FILE:2: providers.solo.model: environment variable MODEL is not set"]


def test_environ_argument_is_the_only_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CB_TEST_PROMPT", "from os.environ")
    text = 'bot: {system_prompt: "${CB_TEST_PROMPT:-from argument}"}'
    cfg = load_config_text(text, source="c.yaml", environ={})
    assert cfg.bot.system_prompt == "from argument"


def test_keys_are_not_substituted(tmp_path: Path) -> None:
    err = load_error(tmp_path, "bot:\n  ${KEY}: 1\n", environ={"KEY": "language"})
    assert render(err) == [
        "FILE:2: bot.${KEY}: unknown key; expected one of: system_prompt, language, timezone"
    ]


def test_a_substituted_secret_in_a_field_that_quotes_its_input_is_masked(tmp_path: Path) -> None:
    text = "platforms:\n  telegram:\n    enabled: ${TOKENISH}\n"
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, source="FILE", environ={"TOKENISH": "hunter22"})
    assert "hunter22" not in str(caught.value)
    assert "platforms.telegram.enabled" in str(caught.value)
