"""Logging set-up that keeps secrets out of every log line.

HTTP client libraries log request URLs, and the Telegram Bot API puts the bot
token in the URL path; so every record is scrubbed of the configured secret
values before any handler formats it. The SDKs' records follow chatbridge's
level rules (`library_logs`): a handled condition is no ERROR.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable

from chatbridge.core.app import library_logs

__all__ = ["JsonFormatter", "SecretRedactor", "setup_logging"]

REDACTED = "[secret]"
# A `/link CODE` (the user's message or the bot's reply) as an SDK may log it
# at debug level: the code is masked like a secret (`core.links`).
_LINK_CODE = re.compile(r"(/link(?:\s|\\n|\\u00a0)+)[A-Za-z0-9]{6,12}\b")
NOISY_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "anthropic",
    "telegram",
    "discord",
    "slack_bolt",
    "slack_sdk",
)


class SecretRedactor(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Longest first so a token containing another secret is fully masked.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def add(self, secrets: Iterable[str]) -> None:
        """Mask these too (a reloaded config may carry new secrets)."""
        merged = set(self._secrets) | {s for s in secrets if len(s) >= 6}
        self._secrets = sorted(merged, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return _LINK_CODE.sub(r"\1[code]", text) if "/link" in text else text

    def filter(self, record: logging.LogRecord) -> bool:
        # Every record: link codes may be in one even when no secret is configured.
        message = self.redact(record.getMessage())
        record.msg, record.args = message, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_text or record.exc_info:
            data["traceback"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(data, ensure_ascii=False)


class _QuietTracebacks(logging.Filter):
    """Tracebacks of handled errors belong to debug level only."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self._level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if self._level > logging.DEBUG and record.exc_info and record.levelno < logging.CRITICAL:
            record.exc_info, record.exc_text = None, None
        return True


def setup_logging(
    *, level: int, secrets: Iterable[str], json_format: bool = False
) -> SecretRedactor:
    """One stderr handler on the root logger, scrubbing `secrets`; returns the scrubber
    so other output (start-up sentences on stderr) can be masked the same way."""
    redactor = SecretRedactor(secrets)
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_QuietTracebacks(level))
    handler.addFilter(redactor)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    # The SDKs' own records follow the same level rules as ours.
    library_logs.install()
    return redactor
