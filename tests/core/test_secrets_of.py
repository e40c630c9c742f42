"""`secrets_of()`: every secret value a config (and the environment) holds, and nothing else.

What it yields is what the log redactor masks, so a secret it misses would
be logged in clear, and a value it wrongly yields (a model name, a URL) would
be masked where an operator needs to read it.
"""

from __future__ import annotations

from pathlib import Path

from chatbridge.config import load_config_text
from chatbridge.core.app.wiring import secrets_of

SECRETS = {
    "TG": "123456:tg-token-AAAA",
    "TG_HOOK": "tg-webhook-secret-BBBB",
    "SLACK_BOT": "xoxb-slack-bot-CCCC",
    "SLACK_APP": "xapp-slack-app-DDDD",
    "SLACK_SIGN": "slack-signing-EEEE",
    "DISCORD": "discord-token-FFFF",
    "OPENAI": "sk-openai-GGGG",
    "ANTHROPIC": "sk-ant-HHHH",
}
CONFIG = """
providers:
  main: {type: openai, model: gpt-visible-model, api_key: "${OPENAI}",
         base_url: "http://127.0.0.1:9/v1"}
  backup: {type: anthropic, model: claude-visible-model, api_key: "${ANTHROPIC}"}
  default: main
platforms:
  telegram: {enabled: true, token: "${TG}", mode: webhook,
             webhook_url: "https://bot.example/telegram/webhook", webhook_secret: "${TG_HOOK}"}
  slack: {enabled: true, bot_token: "${SLACK_BOT}", app_token: "${SLACK_APP}",
          signing_secret: "${SLACK_SIGN}"}
  discord: {enabled: true, token: "${DISCORD}"}
memory: {backend: redis, url: "redis://chatbridge:p%40ss-redis-IIII@127.0.0.1:6379/0"}
access: {allow: [telegram:579304651], admins: [telegram:42]}
identities: {alice: [telegram:579304651, slack:U123]}
"""


def test_every_configured_secret_and_only_secrets() -> None:
    config = load_config_text(CONFIG, source="chatbridge.yaml", environ=SECRETS)
    found = set(secrets_of(config, {}))
    # The Redis password in both spellings: as written in the URL and decoded.
    assert found == set(SECRETS.values()) | {"p%40ss-redis-IIII", "p@ss-redis-IIII"}


def test_a_redis_password_in_the_query_counts_too() -> None:
    text = 'memory: {backend: redis, url: "redis://127.0.0.1:6379/0?password=q-pass-JJJJ"}\n'
    config = load_config_text(text, source="chatbridge.yaml", environ={})
    assert set(secrets_of(config, {})) == {"q-pass-JJJJ"}


def test_keys_picked_up_from_the_environment_count_without_a_providers_section(
    tmp_path: Path,
) -> None:
    """The auto-detected keys (`OPENAI_API_KEY`, or the file `ANTHROPIC_API_KEY_FILE` names)."""
    key_file = tmp_path / "anthropic"
    key_file.write_text("sk-ant-from-file-KKKK\n")
    environ = {"OPENAI_API_KEY": "sk-env-LLLL", "ANTHROPIC_API_KEY_FILE": str(key_file)}
    config = load_config_text("", source="chatbridge.yaml", environ=environ)
    assert set(secrets_of(config, environ)) == {"sk-env-LLLL", "sk-ant-from-file-KKKK"}


def test_a_secret_read_from_a_file_is_yielded_as_its_value(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("987654:from-a-file-MMMM\n")
    text = "platforms:\n  telegram: {enabled: true, token_file: token}\n"
    config = load_config_text(text, source="chatbridge.yaml", environ={}, base_dir=tmp_path)
    assert set(secrets_of(config, {})) == {"987654:from-a-file-MMMM"}


def test_a_config_without_secrets_yields_none() -> None:
    config = load_config_text(
        "bot: {system_prompt: You are kind.}\n", source="chatbridge.yaml", environ={}
    )
    assert list(secrets_of(config, {})) == []
