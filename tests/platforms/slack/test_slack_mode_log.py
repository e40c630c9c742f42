"""Issue 17.4: Slack's start-up log line names the mode and why it was chosen."""

from __future__ import annotations

import logging

import pytest

from tests.support.fake_slack import FakeSlack

from .conftest import Launch


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("http", "HTTP events at /slack/events (the config sets signing_secret and no app_token)"),
        ("socket", "Socket Mode (the config sets app_token)"),
    ],
)
async def test_the_start_up_line_says_which_mode_and_why(
    fake: FakeSlack, launch: Launch, caplog: pytest.LogCaptureFixture, mode: str, said: str
) -> None:
    caplog.set_level(logging.INFO, logger="chatbridge.platforms.slack")
    await launch(mode=mode)
    lines = [r.getMessage() for r in caplog.records if "receiving as" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith(f"via {said}"), lines[0]
