"""Where a Discord channel sits, for `chatbridge config explain`: its server
and, for a thread, its parent channel, read with one REST call
(`GET /channels/{id}`) and the configured bot token."""

from __future__ import annotations

import logging

import aiohttp

from chatbridge.platforms._runtime import one_line, reveal

from ._settings import DiscordSettings

__all__ = ["locate"]

log = logging.getLogger(__name__)

_THREAD_TYPES = frozenset({10, 11, 12})
TIMEOUT = 10.0


async def locate(config: DiscordSettings, chat: str, thread: str = "") -> tuple[str, ...] | None:
    """The place chain of channel `chat` (and `thread` in it), most specific
    first; None when Discord cannot be asked or does not know the channel."""
    token = reveal(config.token)
    if not token or not chat.isdigit():
        return None
    url = f"{config.api_base.rstrip('/')}/channels/{chat}"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as http,
            http.get(url, headers={"Authorization": f"Bot {token}"}) as response,
        ):
            if response.status != 200:
                return None
            channel = await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.debug("discord: channel %s not looked up (%s)", chat, one_line(exc))
        return None
    if not isinstance(channel, dict):
        return None
    guild = channel.get("guild_id")
    if guild is None:
        return (f"discord:{chat}", "discord")  # a DM is in no server
    chain = [f"discord:{chat}", f"discord:guild:{guild}", "discord"]
    parent = channel.get("parent_id")
    if channel.get("type") in _THREAD_TYPES and parent:
        chain.insert(1, f"discord:{parent}")
    if thread:
        chain.insert(0, f"discord:{thread}")
    return tuple(chain)
