"""Relative paths follow the config file; `only=` loads the sections an admin command needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config import ConfigError, load_config, load_config_text
from tests.config._helpers import load_error, load_ok, render


def test_a_relative_store_path_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_ok(tmp_path, "memory:\n  path: store/bot.db\n")
    assert cfg.memory.path == str(tmp_path / "store" / "bot.db")


def test_an_absolute_store_path_stays(tmp_path: Path) -> None:
    assert load_ok(tmp_path, "memory:\n  path: /var/lib/x.db\n").memory.path == "/var/lib/x.db"


def test_a_home_relative_store_path_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = load_ok(tmp_path, "memory:\n  path: ~/bot.db\n")
    assert cfg.memory.path == str(tmp_path / "home" / "bot.db")


def test_the_default_store_path_stays_relative_to_the_working_directory(tmp_path: Path) -> None:
    # Deployments (systemd WorkingDirectory, the Docker image) rely on it.
    assert load_ok(tmp_path, "engine:\n  session_ttl: 1h\n").memory.path == "data/chatbridge.db"
    assert load_config(None, {}).memory.path == "data/chatbridge.db"


def test_text_without_a_file_keeps_relative_paths() -> None:
    cfg = load_config_text("memory:\n  path: a.db\n", source="x.yaml", environ={})
    assert cfg.memory.path == "a.db"


SECRETS_EVERYWHERE = """
memory:
  path: memory.db
platforms:
  telegram:
    enabled: true
    token: ${TELEGRAM_BOT_TOKEN}
  slack:
    enabled: true
    bot_token: 42
providers:
  main:
    type: openai
    model: m
    api_key: ${OPENAI_API_KEY}
engine:
  session_ttl: whenever
access:
  allow: [alice]
identities:
  alice: [telegram:579304651]
"""

ADMIN_SECTIONS = ("memory", "identities", "access")


def test_only_validates_the_named_sections_and_ignores_the_others(tmp_path: Path) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(SECRETS_EVERYWHERE)
    with pytest.raises(ConfigError):
        load_config(path, {})
    cfg = load_config(path, {}, only=ADMIN_SECTIONS)
    assert cfg.memory.path == str(tmp_path / "memory.db")
    assert cfg.identities == {"alice": ("telegram:579304651",)}
    assert cfg.providers.entries == {}
    assert cfg.platforms.enabled == ()


def test_only_still_reports_unknown_top_level_keys(tmp_path: Path) -> None:
    err = load_error(tmp_path, "memroy:\n  path: x.db\n")
    assert render(err) == ["FILE:1: memroy: unknown key; did you mean 'memory'?"]
    path = tmp_path / "chatbridge.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path, {}, only=ADMIN_SECTIONS)
    assert render(info.value) == ["FILE:1: memroy: unknown key; did you mean 'memory'?"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("memory:\n  max_entries: 0\n", "FILE:2: memory.max_entries: "),
        ("access:\n  allow: [bob]\n", "FILE:2: access.allow[0]: no identity named 'bob'"),
    ],
)
def test_only_still_validates_its_sections(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, {}, only=ADMIN_SECTIONS)
    (line,) = render(info.value)
    assert line.startswith(expected)


def test_only_with_an_unknown_section_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="memroy"):
        load_config(None, {}, only=("memroy",))
