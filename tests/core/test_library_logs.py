"""The SDKs' log records follow chatbridge's rules: handled means INFO/WARNING, one line.

The rules match library messages by text, so the first test reads each
library's installed source: a reworded message upstream fails here, not
silently in production. The others drive real libraries where a test can
make the condition (aiohttp's own 400 for a malformed request, discord.py's
voice warnings from a real `discord.Client`) and the filter on each rule's
logger for the rest; `tests/platforms/telegram/test_telegram_log_levels.py` drives
python-telegram-bot's 429 end to end.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging

import pytest
from aiohttp import web

from chatbridge.core.app.library_logs import RULES
from chatbridge.core.app.logs import setup_logging

# Where each library writes the messages its logger logs.
SOURCES = {
    "telegram.ext.AIORateLimiter": ["telegram.ext._aioratelimiter"],
    "discord.client": ["discord.client"],
    "discord.shard": ["discord.shard"],
    "discord.gateway": ["discord.gateway"],
    "slack_bolt.AsyncApp": [
        "slack_bolt.logger.messages",
        "slack_sdk.socket_mode.aiohttp",
        "slack_sdk.socket_mode.async_client",
    ],
    "slack_sdk.socket_mode.aiohttp": [
        "slack_sdk.socket_mode.aiohttp",
        "slack_sdk.socket_mode.async_client",
    ],
    "aiohttp.server": ["aiohttp.web_protocol"],
}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.logger}: {r.starts}")
def test_every_rule_matches_text_the_installed_library_logs(rule: object) -> None:
    logger, starts = rule.logger, rule.starts  # type: ignore[attr-defined]
    source = "".join(inspect.getsource(importlib.import_module(m)) for m in SOURCES[logger])
    assert starts in source, f"{logger} no longer logs {starts!r}: update library_logs.RULES"


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_handled_error_becomes_one_warning_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.INFO, secrets=["123456:very-secret-token"])
    exc = _raised(ConnectionResetError("gateway went away\nsecond line"))
    logging.getLogger("discord.client").error("Attempting a reconnect in %.2fs", 1.5, exc_info=exc)
    (line,) = capsys.readouterr().err.splitlines()
    assert " WARNING discord.client: Attempting a reconnect in 1.50s" in line
    assert line.endswith(": ConnectionResetError: gateway went away second line")


def test_what_loses_an_answer_stays_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.INFO, secrets=[])
    exc = _raised(RuntimeError("handler crashed"))
    logging.getLogger("discord.client").error(
        "Ignoring exception in %s", "on_message", exc_info=exc
    )
    logging.getLogger("aiohttp.server").error("Error handling request from %s", "x", exc_info=exc)
    err = capsys.readouterr().err
    assert err.count(" ERROR ") == 2, err


def test_a_relevelled_record_respects_the_configured_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(level=logging.ERROR, secrets=[])
    logging.getLogger("telegram.ext.AIORateLimiter").error(
        "Rate limit hit after maximum of 0 retries"
    )
    assert capsys.readouterr().err == ""


def test_the_traceback_stays_for_debug_level(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level=logging.DEBUG, secrets=[])
    exc = _raised(TimeoutError("slow"))
    logging.getLogger("discord.shard").error("Attempting a reconnect for shard ID 0", exc_info=exc)
    err = capsys.readouterr().err
    assert " WARNING discord.shard" in err
    assert "Traceback" in err


def test_discord_voice_warnings_are_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    import discord
    from discord.voice_client import VoiceClient

    setup_logging(level=logging.INFO, secrets=[])
    # discord.py warns once per process; re-arm it as a fresh `run` has it.
    VoiceClient.warn_nacl = VoiceClient.warn_dave = True
    discord.Client(intents=discord.Intents.none())
    assert not VoiceClient.warn_nacl, "discord.py did not warn"
    assert not VoiceClient.warn_dave, "discord.py did not warn"
    logging.getLogger("discord.client").warning("another discord.client warning")
    err = capsys.readouterr().err
    assert "PyNaCl" not in err
    assert "davey" not in err
    assert "another discord.client warning" in err, "the filter hid more than the voice lines"


async def test_a_malformed_request_refused_by_aiohttp_is_info(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging(level=logging.INFO, secrets=[])
    runner = web.AppRunner(web.Application(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        await writer.drain()
        status = await reader.readline()
        writer.close()
    finally:
        await runner.cleanup()
    assert status.startswith(b"HTTP/1.0 400") or status.startswith(b"HTTP/1.1 400"), status
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "aiohttp.server" in line]
    assert len(lines) == 1, err
    assert " INFO aiohttp.server: Error handling request from 127.0.0.1: BadHttpMessage" in lines[0]
    assert "Traceback" not in err
