"""`platforms.telegram.drafts` and `platforms.slack.native_stream`: on by default, `false` works."""

from __future__ import annotations

from pathlib import Path

from chatbridge.config import load_config
from tests.config._helpers import load_error, load_ok, render


def test_drafts_and_native_streams_are_on_by_default() -> None:
    cfg = load_config(None, {})
    assert cfg.platforms.telegram.drafts is True
    assert cfg.platforms.slack.native_stream is True


def test_both_switch_off(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        platforms:
          telegram: {drafts: false}
          slack: {native_stream: false}
        """,
    )
    assert cfg.platforms.telegram.drafts is False
    assert cfg.platforms.slack.native_stream is False


def test_a_non_boolean_is_an_error_naming_the_key(tmp_path: Path) -> None:
    err = load_error(tmp_path, "platforms:\n  telegram:\n    drafts: sometimes\n")
    (line,) = render(err)
    assert line.startswith("FILE:3: platforms.telegram.drafts:"), line
