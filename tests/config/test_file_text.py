"""Text YAML cannot hold (tabs, NUL and control bytes, bytes that are not UTF-8):
one `FILE:LINE: what to do` line each, through the loader and `config check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.config import ConfigError, load_config
from chatbridge.core.app.cli import main

CASES = {
    "tab indentation": (
        b"bot:\n  language: en\n\tsystem_prompt: hi\n",
        3,
        "tabs are not allowed in YAML indentation; use spaces",
    ),
    "tab after spaces": (
        b"bot:\n  \tlanguage: en\n",
        2,
        "tabs are not allowed in YAML indentation; use spaces",
    ),
    "tab after a key": (
        b"bot:\n  language:\ten\n",
        2,
        "a tab cannot separate YAML here (column 12); use a space",
    ),
    "NUL byte": (
        b"bot:\n  language: en\n  system_prompt: hi\x00\n",
        3,
        "NUL bytes (\\x00) are not allowed; save the file as UTF-8 text",
    ),
    "UTF-16 from an editor": (
        "bot:\n  language: en\n".encode("utf-16"),
        1,
        "this is UTF-16 text; save the file as UTF-8",
    ),
    "another control byte": (
        b"bot:\n  system_prompt: ding\x07\n",
        2,
        "control character U+0007 is not allowed in YAML; delete it",
    ),
    "Latin-1 umlaut": (
        "bot:\n  language: de\n  system_prompt: Grüße\n".encode("latin-1"),
        3,
        "byte 0xfc is not UTF-8 text; save the file as UTF-8",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_gets_its_line_and_what_to_do(name: str, tmp_path: Path) -> None:
    raw, line, advice = CASES[name]
    path = tmp_path / "chatbridge.yaml"
    path.write_bytes(raw)
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    (issue,) = info.value.issues
    assert str(issue).startswith(f"{path}:{line}: {advice}"), str(issue)
    assert "\n" not in str(issue)


def test_a_tab_inside_a_quoted_value_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_bytes(b'bot:\n  system_prompt: "a\tb"\n')
    assert load_config(path, {}).bot.system_prompt == "a\tb"


def test_config_check_prints_the_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_bytes(b"memory:\n\tmax_entries: 5\n")
    assert main(["config", "check", "--config", str(path)], environ={}) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"{path}:2: tabs are not allowed in YAML indentation; use spaces"]
