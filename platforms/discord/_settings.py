"""What the Discord adapter reads of its config section (`platforms.discord`).

A Protocol, not the config model: the adapter never imports the config; the
composition root hands it the validated section, which has these fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from chatbridge.platforms._runtime import Secret

__all__ = ["DiscordSettings"]


class DiscordSettings(Protocol):
    @property
    def token(self) -> Secret | None:
        """The bot token from the Developer Portal."""
        ...

    @property
    def api_base(self) -> str:
        """The REST root."""
        ...

    @property
    def gateway_url(self) -> str:
        """The gateway's URL for the first connect."""
        ...

    @property
    def edit_interval(self) -> float:
        """Seconds between two edits of one streamed message."""
        ...

    @property
    def thread_per_mention(self) -> bool:
        """Whether a channel mention is answered in a new thread."""
        ...

    @property
    def shard_count(self) -> int | None:
        """Total shards; None runs one unsharded connection."""
        ...

    @property
    def shard_ids(self) -> Sequence[int] | None:
        """The shards this process runs; None: all of them."""
        ...
