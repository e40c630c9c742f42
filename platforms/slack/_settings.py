"""What the Slack adapter reads of its config section (`platforms.slack`).

A Protocol, not the config model: the adapter never imports the config; the
composition root hands it the validated section, which has these fields.
"""

from __future__ import annotations

from typing import Protocol

from chatbridge.platforms._runtime import Secret

__all__ = ["SlackSettings"]


class SlackSettings(Protocol):
    @property
    def bot_token(self) -> Secret | None:
        """The `xoxb-` bot token."""
        ...

    @property
    def app_token(self) -> Secret | None:
        """The `xapp-` app-level token; set, events arrive over Socket Mode."""
        ...

    @property
    def signing_secret(self) -> Secret | None:
        """Verifies HTTP event requests (HTTP mode)."""
        ...

    @property
    def base_url(self) -> str:
        """The Web API root."""
        ...

    @property
    def edit_interval(self) -> float:
        """Seconds between two `chat.update` calls on one streamed message."""
        ...

    @property
    def native_stream(self) -> bool:
        """Whether thread replies stream with `chat.startStream`."""
        ...

    @property
    def mode_reason(self) -> str:
        """Why the mode is what it is, for the start-up log line."""
        ...
