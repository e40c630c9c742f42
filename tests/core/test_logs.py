"""Logging operators can use: masked secrets, JSON lines, tracebacks only at debug."""

from __future__ import annotations

import json
import logging

import pytest

from chatbridge.config import load_config_text
from chatbridge.core.app.cli import _log_level, _parser
from chatbridge.core.app.logs import setup_logging

SECRET = "123456:very-secret-token"


def _fail_with_traceback(log: logging.Logger) -> None:
    try:
        raise ValueError(f"boom with {SECRET}")
    except ValueError:
        log.warning("handled a failure", exc_info=True)


def test_json_format_is_one_masked_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.INFO, secrets=[SECRET], json_format=True)
    log = logging.getLogger("chatbridge.test")
    log.info("calling https://api.telegram.org/bot%s/getMe", SECRET)
    log.warning("second line")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "info"
    assert first["logger"] == "chatbridge.test"
    assert SECRET not in first["message"]
    assert "[secret]" in first["message"]
    assert second["message"] == "second line"


def test_handled_errors_have_no_traceback_above_debug(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.INFO, secrets=[SECRET])
    _fail_with_traceback(logging.getLogger("chatbridge.test"))
    err = capsys.readouterr().err
    assert "handled a failure" in err
    assert "Traceback" not in err


def test_debug_shows_the_traceback_masked(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.DEBUG, secrets=[SECRET])
    _fail_with_traceback(logging.getLogger("chatbridge.test"))
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "ValueError" in err
    assert SECRET not in err


def test_a_reloaded_secret_is_masked_too(capsys: pytest.CaptureFixture[str]) -> None:
    redactor = setup_logging(level=logging.INFO, secrets=[SECRET])
    redactor.add(["sk-new-key-after-reload"])
    logging.getLogger("chatbridge.test").warning("key sk-new-key-after-reload and %s", SECRET)
    err = capsys.readouterr().err
    assert "sk-new-key-after-reload" not in err
    assert SECRET not in err


@pytest.mark.parametrize(
    ("argv", "environ", "config", "expected"),
    [
        (["run"], {}, "", logging.INFO),
        (["run"], {}, "logging: {level: warning}\n", logging.WARNING),
        (["run"], {"CHATBRIDGE_LOG_LEVEL": "debug"}, "logging: {level: warning}\n", logging.DEBUG),
        (["run", "--log-level", "error"], {"CHATBRIDGE_LOG_LEVEL": "debug"}, "", logging.ERROR),
        (["run"], {"CHATBRIDGE_LOG_LEVEL": "nonsense"}, "", logging.INFO),
        (["chat"], {"CHATBRIDGE_LOG_LEVEL": "debug"}, "", logging.WARNING),
    ],
)
def test_log_level_order_is_flag_then_environment_then_config(
    argv: list[str], environ: dict[str, str], config: str, expected: int
) -> None:
    args = _parser().parse_args(argv)
    loaded = load_config_text(config, source="t.yaml", environ={})
    assert _log_level(args, loaded, environ) == expected
