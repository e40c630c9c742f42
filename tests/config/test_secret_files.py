"""Secrets from files: `<field>_file: PATH` keys and `$VAR_FILE`; never echoing the content."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config import load_config
from tests.config._helpers import load_error, load_ok, render

TOKEN = "123456:AAH-very-secret-token"
TG_ON = "platforms:\n  telegram:\n    enabled: true\n"


def _secret(tmp_path: Path, name: str = "tg", content: str = TOKEN + "\n") -> Path:
    path = tmp_path / "secrets" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    return path


def test_a_token_file_is_read_and_its_trailing_newline_dropped(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    cfg = load_ok(tmp_path, TG_ON + f"    token_file: {secret}\n")
    assert cfg.platforms.telegram.token is not None
    assert cfg.platforms.telegram.token.get_secret_value() == TOKEN


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("providers:\n  main:\n    type: openai\n    model: m\n", "api_key"),
        ("platforms:\n  slack:\n    enabled: true\n    bot_token: xoxb-1\n", "app_token"),
        ("platforms:\n  slack:\n    enabled: true\n    bot_token: xoxb-1\n", "signing_secret"),
        ("platforms:\n  discord:\n    enabled: true\n", "token"),
    ],
)
def test_every_secret_field_takes_a_file(tmp_path: Path, section: str, field: str) -> None:
    secret = _secret(tmp_path, content="s3cr3t\r\n")
    cfg = load_ok(tmp_path, f"{section}    {field}_file: {secret}\n")
    node: object = cfg.providers.entries["main"] if "providers" in section else None
    if node is None:
        node = cfg.platforms.slack if "slack" in section else cfg.platforms.discord
    assert getattr(node, field).get_secret_value() == "s3cr3t"


def test_a_relative_secret_file_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _secret(tmp_path)
    monkeypatch.chdir(_secret(tmp_path).parent)
    cfg = load_ok(tmp_path, TG_ON + "    token_file: secrets/tg\n")
    assert cfg.platforms.telegram.token is not None


def test_a_token_file_replaces_the_env_default(tmp_path: Path) -> None:
    # TELEGRAM_BOT_TOKEN is the built-in default of `token`; a file is not "both".
    secret = _secret(tmp_path)
    env = {"TELEGRAM_BOT_TOKEN": "from-env"}
    text = TG_ON + f"    token_file: {secret}\n"
    cfg = load_ok(tmp_path, text, environ=env)
    assert cfg.platforms.telegram.token is not None
    assert cfg.platforms.telegram.token.get_secret_value() == TOKEN


def test_value_and_file_both_set_is_an_error(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    err = load_error(
        tmp_path,
        TG_ON + f"    token: {TOKEN}\n    token_file: {secret}\n",
    )
    assert render(err) == [
        "FILE:5: platforms.telegram.token_file: set either token or token_file, not both"
    ]
    assert "AAH" not in str(err)


def test_an_empty_value_beside_a_file_is_not_both(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    text = TG_ON + f'    token: ""\n    token_file: {secret}\n'
    assert load_ok(tmp_path, text).platforms.telegram.token is not None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "no such file"),
        (lambda d: d, "not a regular file"),
        (lambda d: _secret(d, "empty", "\n"), "is empty"),
        (lambda d: _secret(d, "big", "x" * 70_000), "is larger than 64 KiB"),
    ],
    ids=["missing", "directory", "empty", "too-large"],
)
def test_an_unusable_secret_file_is_one_line_naming_it(
    tmp_path: Path, make: object, message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    err = load_error(tmp_path, TG_ON + f"    token_file: {path}\n")
    (line,) = render(err)
    assert line.startswith("FILE:4: platforms.telegram.token_file: ")
    assert str(path) in line
    assert message in line


def test_an_unreadable_secret_file_never_shows_its_content(tmp_path: Path) -> None:
    secret = _secret(tmp_path, content=TOKEN + "\xff")
    secret.write_bytes(TOKEN.encode() + b"\xff\xfe")
    err = load_error(tmp_path, TG_ON + f"    token_file: {secret}\n")
    assert "not UTF-8" in str(err)
    assert "AAH" not in str(err)


def test_a_missing_file_of_a_disabled_platform_is_no_error(tmp_path: Path) -> None:
    text = f"platforms:\n  telegram:\n    enabled: false\n    token_file: {tmp_path / 'nope'}\n"
    assert load_ok(tmp_path, text).platforms.telegram.token is None


def test_a_file_key_of_a_non_secret_is_still_unknown(tmp_path: Path) -> None:
    err = load_error(tmp_path, "platforms:\n  telegram:\n    mode_file: /x\n")
    assert render(err)[0].startswith("FILE:3: platforms.telegram.mode_file: unknown key")


def test_var_file_is_read_when_the_variable_is_unset(tmp_path: Path) -> None:
    secret = _secret(tmp_path, "openai", "sk-from-file\n")
    text = "providers:\n  main:\n    type: openai\n    model: m\n    api_key: ${OPENAI_API_KEY}\n"
    cfg = load_ok(tmp_path, text, environ={"OPENAI_API_KEY_FILE": str(secret)})
    api_key = cfg.providers.entries["main"].api_key
    assert api_key is not None
    assert api_key.get_secret_value() == "sk-from-file"


def test_var_file_serves_the_built_in_token_default(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    cfg = load_ok(
        tmp_path,
        "platforms:\n  telegram:\n    enabled: true\n",
        environ={"TELEGRAM_BOT_TOKEN_FILE": str(secret)},
    )
    assert cfg.platforms.telegram.token is not None
    assert cfg.platforms.telegram.token.get_secret_value() == TOKEN


def test_var_and_var_file_both_set_is_an_error(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_BOT_TOKEN_FILE": str(secret)}
    err = load_error(tmp_path, "platforms:\n  telegram:\n    enabled: true\n", environ=env)
    (line,) = render(err)
    assert "TELEGRAM_BOT_TOKEN and TELEGRAM_BOT_TOKEN_FILE are both set" in line
    assert "AAH" not in line


def test_an_unreadable_var_file_names_the_variable_and_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    env = {"TELEGRAM_BOT_TOKEN_FILE": str(missing)}
    err = load_error(tmp_path, "platforms:\n  telegram:\n    enabled: true\n", environ=env)
    (line,) = render(err)
    assert line.startswith("FILE:2: platforms.telegram.token: TELEGRAM_BOT_TOKEN_FILE: ")
    assert f"cannot read secret file {missing}: no such file" in line


def test_an_unreadable_var_file_of_a_disabled_platform_is_no_error(tmp_path: Path) -> None:
    env = {"TELEGRAM_BOT_TOKEN_FILE": str(tmp_path / "nope")}
    assert load_ok(tmp_path, "bot:\n  language: en\n", environ=env).platforms.enabled == ()


def test_file_secrets_are_secret_str(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    path = tmp_path / "chatbridge.yaml"
    path.write_text(TG_ON + f"    token_file: {secret}\n")
    cfg = load_config(path, {})
    assert TOKEN not in repr(cfg)
    assert TOKEN not in str(cfg)
    # The file key replaces the `${TELEGRAM_BOT_TOKEN}` default, so its _FILE is never read.
    assert load_config(path, {"TELEGRAM_BOT_TOKEN_FILE": "/nope"}) == cfg
