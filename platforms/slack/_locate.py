"""Where a Slack channel sits, for `chatbridge config explain`: the workspace
the bot token belongs to (`auth.test`), since a bot answers in one workspace."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.platforms._runtime import one_line, reveal

from ._settings import SlackSettings

__all__ = ["locate"]

log = logging.getLogger(__name__)

TIMEOUT = 10


async def locate(config: SlackSettings, chat: str, thread: str = "") -> tuple[str, ...] | None:
    """`(slack:CHANNEL, slack:team:T…, slack)`; None when Slack cannot be asked.
    A thread follows its channel (a Slack thread has no scope of its own)."""
    token = reveal(config.bot_token)
    if not token:
        return None
    client = AsyncWebClient(token=token, base_url=config.base_url, timeout=TIMEOUT)
    try:
        answer = await client.auth_test()
    except (SlackClientError, OSError, TimeoutError) as exc:
        log.debug("slack: workspace not looked up (%s)", one_line(exc))
        return None
    team = answer.get("team_id")
    if not isinstance(team, str) or not team:
        return None
    return (f"slack:{chat}", f"slack:team:{team}", "slack")
