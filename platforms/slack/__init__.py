"""Slack adapter: bolt events (Socket Mode or HTTP) in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from typing import Any

from ._adapter import EVENTS_PATH, NotTaken, SlackPlatform
from ._filters import ActiveThreads, Address, BotIdentity, strip_mention, to_message
from ._format import MrkdwnRenderer, escape
from ._locate import locate
from ._outbox import MAX_CHARS, SlackOutbox, StatusSwitch, message_ref, parse_ref
from ._startup import OPTIONAL_SCOPES, REQUIRED_SCOPES, check_tokens

__all__ = [
    "EVENTS_PATH",
    "MAX_CHARS",
    "OPTIONAL_SCOPES",
    "REQUIRED_SCOPES",
    "ActiveThreads",
    "Address",
    "BotIdentity",
    "MrkdwnRenderer",
    "NotTaken",
    "SlackOutbox",
    "SlackPlatform",
    "StatusSwitch",
    "check_tokens",
    "escape",
    "from_config",
    "locate",
    "message_ref",
    "parse_ref",
    "strip_mention",
    "to_message",
]


def from_config(config: Any, context: Any) -> SlackPlatform:
    """The registry's factory: `config` is `platforms.slack`, `context` a
    `chatbridge.core.app.registry.PlatformContext`."""
    return SlackPlatform(
        config=config,
        handler=context.handler,
        commands=context.commands,
        server=context.server,
        say=getattr(context, "say", None),
        mention_rule=getattr(context, "mention_rule", None),
    )
