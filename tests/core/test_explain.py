"""Issue 20: `chatbridge config explain --chat PLACE` — one `KEY: VALUE (SOURCE)`
line per setting; unknown places show the top-level values; a malformed
place is one line and exit 2. (Server lookups through the platform APIs are
covered by the scenario tests against the Discord and Slack fakes.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config._scopes import ScopeSettings
from chatbridge.core.app.cli import main
from chatbridge.core.app.explain import BadPlace, parse_place

CONFIG = """
bot:
  system_prompt: "You help.\\nBriefly."
  language: en
providers:
  default: main
  fallback: [backup]
  main: {type: debug}
  backup: {type: openai, model: gpt-backup, api_key: sk-explain-secret}
scopes:
  "telegram:-100123":
    provider: backup
    session_ttl: 10m
  telegram:
    language: de
  discord:guild:42:
    system_prompt: "GUILD"
  discord:77:
    model: gpt-channel
"""


def _explain(
    tmp_path: Path, place: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str], str]:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(CONFIG)
    code = main(["config", "explain", "--chat", place, "--config", str(path)], environ={})
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_a_scoped_group_shows_each_setting_with_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = _explain(tmp_path, "telegram:-100123", capsys)
    assert code == 0
    assert lines == [
        'system_prompt: "You help.\\nBriefly." (bot.system_prompt)',
        "provider: backup (telegram:-100123)",
        "model: gpt-backup (providers.backup.model)",
        "language: de (telegram)",
        "session_ttl: 10m (telegram:-100123)",
        "session_max_turns: 40 (engine.session_max_turns)",
        "inject_entries: 5 (memory.inject_entries)",
        "require_mention: true (built-in default)",
        "limits: none (built-in default)",
    ]
    assert [line.split(":")[0] for line in lines] == list(ScopeSettings.model_fields)


def test_a_topic_follows_its_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, group, _ = _explain(tmp_path, "telegram:-100123", capsys)
    code, topic, _ = _explain(tmp_path, "telegram:-100123/thread:7", capsys)
    assert (code, topic) == (0, group)


def test_an_unknown_place_shows_the_top_level_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = _explain(tmp_path, "slack:C0NOBODY", capsys)
    assert code == 0, err
    assert "provider: main (providers.default; server unknown)" in lines
    assert "language: en (bot.language; server unknown)" in lines
    assert "sk-explain-secret" not in "\n".join(lines) + err


def test_a_channel_whose_server_cannot_be_asked_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = _explain(tmp_path, "discord:77/thread:88", capsys)
    assert code == 0
    assert "model: gpt-channel (discord:77)" in lines  # the channel's own scope is certain
    assert 'system_prompt: "You help.\\nBriefly." (bot.system_prompt; server unknown)' in lines


def test_a_server_place_needs_no_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _explain(tmp_path, "discord:guild:42", capsys)
    assert code == 0
    assert "system_prompt: GUILD (discord:guild:42)" in lines
    assert not any("server unknown" in line for line in lines)


@pytest.mark.parametrize(
    "place", ["slack:general", "whatsapp:123", "telegram:-100/topic:5", "discord:1/thread:x", ""]
)
def test_a_malformed_place_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], place: str
) -> None:
    code, lines, err = _explain(tmp_path, place, capsys)
    assert code == 2
    assert lines == []
    assert err.count("\n") == 1
    assert err.startswith("chatbridge: --chat ")
    assert "Traceback" not in err


def test_parse_place() -> None:
    place = parse_place("discord:234567890123456789/thread:345678901234567890")
    assert (place.platform, place.chat, place.thread) == (
        "discord",
        "234567890123456789",
        "345678901234567890",
    )
    assert parse_place("slack:team:T0123").chat == ""
    with pytest.raises(BadPlace):
        parse_place("discord:guild:1/thread:2")
