"""Issue 17.4: the admin's config decides the Slack mode, not the environment.

`SLACK_APP_TOKEN` / `SLACK_SIGNING_SECRET` fill `app_token` / `signing_secret`
only when the `platforms.slack` section sets neither (nor a `_file` twin).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config._helpers import load_ok

ENV = {
    "SLACK_BOT_TOKEN": "xoxb-1",
    "SLACK_APP_TOKEN": "xapp-1-from-env",
    "SLACK_SIGNING_SECRET": "s",
}


def test_a_config_with_signing_secret_is_http_mode_whatever_the_environment_holds(
    tmp_path: Path,
) -> None:
    text = """
    platforms:
      slack:
        enabled: true
        bot_token: xoxb-config
        signing_secret: from-the-config
    """
    slack = load_ok(tmp_path, text, environ=ENV).platforms.slack
    assert slack.app_token is None
    assert not slack.socket_mode
    assert slack.signing_secret is not None
    assert slack.signing_secret.get_secret_value() == "from-the-config"
    assert "signing_secret" in slack.mode_reason
    assert "SLACK_APP_TOKEN" not in slack.mode_reason


def test_a_signing_secret_file_counts_as_setting_the_mode(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("from-a-file\n")
    text = """
    platforms:
      slack:
        enabled: true
        signing_secret_file: secret
    """
    slack = load_ok(tmp_path, text, environ=ENV).platforms.slack
    assert not slack.socket_mode
    assert slack.signing_secret is not None
    assert slack.signing_secret.get_secret_value() == "from-a-file"


def test_a_config_with_app_token_keeps_socket_mode(tmp_path: Path) -> None:
    text = """
    platforms:
      slack:
        enabled: true
        app_token: xapp-config
    """
    slack = load_ok(tmp_path, text, environ=ENV).platforms.slack
    assert slack.socket_mode
    assert slack.app_token is not None
    assert slack.app_token.get_secret_value() == "xapp-config"
    assert slack.signing_secret is None  # the environment's secret is not mixed in
    assert "app_token" in slack.mode_reason


@pytest.mark.parametrize(
    ("environ", "socket"),
    [(ENV, True), ({"SLACK_BOT_TOKEN": "b", "SLACK_SIGNING_SECRET": "s"}, False)],
)
def test_without_a_mode_in_the_config_the_environment_decides_and_says_so(
    tmp_path: Path, environ: dict[str, str], socket: bool
) -> None:
    slack = load_ok(tmp_path, "platforms:\n  slack:\n    enabled: true\n", environ=environ)
    slack_config = slack.platforms.slack
    assert slack_config.socket_mode is socket
    assert "environment" in slack_config.mode_reason
    variable = "SLACK_APP_TOKEN" if socket else "SLACK_SIGNING_SECRET"
    assert variable in slack_config.mode_reason
