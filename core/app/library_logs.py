"""Third-party loggers held to chatbridge's level rules.

chatbridge's rule: a condition that is handled and waited out (a 429, a
gateway reconnect, a malformed request refused with 400) is INFO or WARNING,
one line, no traceback; only what loses an answer is ERROR. The SDKs log
some handled conditions at ERROR with a traceback (python-telegram-bot's
`AIORateLimiter` logs every 429 that way when `max_retries=0`, which
chatbridge sets because its own delivery code waits the `retry_after` out),
and print warnings that never concern a text bot (discord.py's voice
libraries, bolt's "token will be unused" when chatbridge hands it a client).

Each `Rule` names one library message on the exact logger it is logged on;
`install` attaches one filter per such logger (never to the root, never
`logging.disable`), so every other record of that library and of every
other logger passes untouched. A rule's `level` is what the condition means
here; `None` drops the record. A re-levelled record keeps its exception as
one `: Type: message` suffix; its traceback then shows at debug only, like
every handled error's (`logs._QuietTracebacks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["RULES", "LibraryRules", "Rule", "install"]


def _client_error(exc: BaseException | None) -> bool:
    """aiohttp answered the request 400 itself: the client sent no valid HTTP.

    aiohttp is imported here, when aiohttp logs, not when logging is set up:
    `chatbridge chat` and a Telegram bot in polling mode may never need it."""
    from aiohttp.http_exceptions import HttpProcessingError

    return isinstance(exc, HttpProcessingError)


@dataclass(frozen=True, slots=True)
class Rule:
    """One library message (by its fixed beginning) and the level it deserves."""

    logger: str
    starts: str
    level: int | None  # None: not shown at all
    why: str
    when: Callable[[BaseException | None], bool] | None = None  # only for these exceptions


_WARNING, _INFO = logging.WARNING, logging.INFO
_DETAIL_CHARS = 300  # aiohttp quotes the client's bad bytes; a line, not a dump
_SOCKET_MODE = ("slack_bolt.AsyncApp", "slack_sdk.socket_mode.aiohttp")

RULES: tuple[Rule, ...] = (
    Rule(
        "telegram.ext.AIORateLimiter",
        "Rate limit hit after maximum of",
        _WARNING,
        "a 429 passed on to chatbridge's delivery, which waits retry_after and sends again",
    ),
    Rule(
        "discord.client",
        "Attempting a reconnect in",
        _WARNING,
        "discord.py reconnects and resumes the gateway session by itself",
    ),
    Rule(
        "discord.shard",
        "Attempting a reconnect for shard ID",
        _WARNING,
        "discord.py reconnects the shard by itself",
    ),
    Rule(
        "discord.shard",
        "Failed to connect for shard_id",
        _WARNING,
        "discord.py retries the shard's connect by itself",
    ),
    Rule(
        "discord.gateway",
        "An error occurred while stopping the gateway",
        _WARNING,
        "discord.py ignores it and goes on",
    ),
    Rule("discord.client", "PyNaCl is not installed", None, "voice only; a text bot never joins"),
    Rule("discord.client", "davey is not installed", None, "voice only; a text bot never joins"),
    Rule(
        "slack_bolt.AsyncApp",
        "As you gave `client` as well",
        None,
        "bolt reads $SLACK_BOT_TOKEN by itself; chatbridge's client carries the configured token",
    ),
    *(
        Rule(name, starts, _WARNING, "slack-sdk's Socket Mode client reconnects by itself")
        for name in _SOCKET_MODE
        for starts in (
            "Failed to connect (error:",
            "Failed to check the current session",
            "Failed to retrieve WSS URL",
            "Failed to close the old session",
        )
    ),
    Rule(
        "aiohttp.server",
        "Error handling request",
        _INFO,
        "a client sent something that is not HTTP; aiohttp answered 400",
        when=_client_error,
    ),
)


def _exception_of(record: logging.LogRecord) -> BaseException | None:
    info = record.exc_info
    return info[1] if info else None


class LibraryRules(logging.Filter):
    """The rules of one logger; a record no rule matches passes unchanged."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        super().__init__()
        self.rules = tuple(rules)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        exc = _exception_of(record)
        for rule in self.rules:
            if not message.startswith(rule.starts) or (rule.when and not rule.when(exc)):
                continue
            if rule.level is None:
                return False
            if exc is not None:
                # One line says why; the traceback stays for debug level.
                detail = " ".join(str(exc).split())[:_DETAIL_CHARS]
                message = f"{message}: {type(exc).__name__}" + (f": {detail}" if detail else "")
            record.msg, record.args = message, None
            record.levelno, record.levelname = rule.level, logging.getLevelName(rule.level)
            # The library checked its level before a record it meant as ERROR.
            return logging.getLogger(record.name).isEnabledFor(rule.level)
        return True


def install(rules: Iterable[Rule] = RULES) -> None:
    """Attach the rules to their loggers, replacing any installed before."""
    by_logger: dict[str, list[Rule]] = {}
    for rule in rules:
        by_logger.setdefault(rule.logger, []).append(rule)
    for name in {*by_logger, *(r.logger for r in RULES)}:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LibraryRules)]:
            logger.removeFilter(old)
        if name in by_logger:
            logger.addFilter(LibraryRules(by_logger[name]))
