"""Logging set-up that keeps secrets out of every log line.

HTTP client libraries log request URLs, and the Telegram Bot API puts the bot
token in the URL path; so every record is scrubbed of the configured secret
values before any handler formats it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

__all__ = ["SecretRedactor", "setup_logging"]

REDACTED = "[secret]"
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "anthropic", "telegram", "discord")


class SecretRedactor(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Longest first so a token containing another secret is fully masked.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = self.redact(record.getMessage())
            record.msg, record.args = message, None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.redact(record.exc_text)
        return True


def setup_logging(*, level: int, secrets: Iterable[str]) -> None:
    """One stderr handler on the root logger, scrubbing `secrets`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretRedactor(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
