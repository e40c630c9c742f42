"""Slack adapter: bolt events (Socket Mode or HTTP) in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from chatbridge.core.ports import PlatformContext

from ._adapter import EVENTS_PATH, NotTaken, SlackPlatform
from ._filters import Address, BotIdentity, SlackThreads, normalise
from ._format import MrkdwnRenderer, escape
from ._locate import locate
from ._outbox import (
    MAX_CHARS,
    SlackOutbox,
    StatusSwitch,
    parse_sent_message,
    sent_message,
    slack_delivery,
)
from ._settings import SlackSettings
from ._startup import OPTIONAL_SCOPES, REQUIRED_SCOPES, check_tokens

__all__ = [
    "EVENTS_PATH",
    "MAX_CHARS",
    "OPTIONAL_SCOPES",
    "REQUIRED_SCOPES",
    "Address",
    "BotIdentity",
    "MrkdwnRenderer",
    "NotTaken",
    "SlackOutbox",
    "SlackPlatform",
    "SlackSettings",
    "SlackThreads",
    "StatusSwitch",
    "check_tokens",
    "escape",
    "from_config",
    "locate",
    "normalise",
    "parse_sent_message",
    "sent_message",
    "slack_delivery",
]


def from_config(settings: SlackSettings, context: PlatformContext) -> SlackPlatform:
    """The registry's factory (`core.ports.PlatformFactory`): `settings` is
    `platforms.slack`. Commands are typed as text: Slack registers none."""
    return SlackPlatform(
        config=settings,
        handler=context.handler,
        say=context.say,
        mention_rule=context.mention_rule,
    )
