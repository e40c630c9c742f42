"""Start-up checks: each refusal becomes one `PlatformStartFailed` sentence.

Checked before any call: a `xapp-` token in `bot_token` (and a non-`xapp-`
one in `app_token`). Then `auth.test`: a rejected token, and the scopes the
app was granted (its `x-oauth-scopes` header) against what answering needs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.core.ports import PlatformStartFailed

from ._filters import BotIdentity

__all__ = ["OPTIONAL_SCOPES", "REQUIRED_SCOPES", "Granted", "check_tokens", "connect"]

log = logging.getLogger(__name__)

REQUIRED_SCOPES = ("chat:write", "app_mentions:read", "im:history")
OPTIONAL_SCOPES = {
    "channels:history": "thread follow-ups without a new mention, and finding a thread "
    "answer posted but not recorded before a restart",
    "assistant:write": "the 'is thinking…' status",
    "files:read": "photos, voice clips or files (Slack answers their downloads with a login page)",
}
_REJECTED = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)


@dataclass(frozen=True, slots=True)
class Granted:
    """Who the bot is and what it may do; `scopes` None: Slack did not say."""

    me: BotIdentity
    scopes: frozenset[str] | None
    team: str = ""  # the workspace's team_id (a stream's recipient_team_id)

    def has(self, scope: str) -> bool:
        return self.scopes is None or scope in self.scopes


def check_tokens(bot_token: str, app_token: str | None) -> None:
    """Raises `PlatformStartFailed` for a token in the wrong key (no network call)."""
    if not bot_token:
        raise PlatformStartFailed("platforms.slack.bot_token is empty; set the app's xoxb- token")
    if bot_token.startswith("xapp-"):
        raise PlatformStartFailed(
            "platforms.slack.bot_token holds an app-level token (xapp-…); put the xoxb- bot "
            "token there and the xapp- token in platforms.slack.app_token"
        )
    if app_token is not None and not app_token.startswith("xapp-"):
        raise PlatformStartFailed(
            "platforms.slack.app_token must be an app-level token (xapp-…) with the "
            "connections:write scope"
        )


async def connect(client: AsyncWebClient) -> Granted:
    """`auth.test`, then the scope check; raises `PlatformStartFailed` with one sentence."""
    try:
        response = await client.auth_test()
    except SlackApiError as exc:
        error = str(exc.response.get("error", "unknown_error"))
        if error in _REJECTED:
            raise PlatformStartFailed(
                f"slack rejected the bot token ({error}); check platforms.slack.bot_token"
            ) from None
        raise PlatformStartFailed(f"slack auth.test failed ({error})") from None
    user_id = response.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise PlatformStartFailed("slack auth.test did not name the bot user; is it a bot token?")
    team = response.get("team_id")
    granted = Granted(
        BotIdentity(user_id),
        _scopes(response.headers),
        team if isinstance(team, str) else "",
    )
    missing = [s for s in REQUIRED_SCOPES if not granted.has(s)]
    if missing:
        raise PlatformStartFailed(
            f"the slack app lacks the scope{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; add them under OAuth & Permissions and reinstall the app"
        )
    for scope, feature in OPTIONAL_SCOPES.items():
        if not granted.has(scope):
            log.info("slack: no %s scope, so no %s", scope, feature)
    return granted


def _scopes(headers: Mapping[str, Any] | None) -> frozenset[str] | None:
    for key, value in (headers or {}).items():
        if key.lower() == "x-oauth-scopes":
            text = value[0] if isinstance(value, list) and value else value
            return frozenset(s.strip() for s in str(text).split(",") if s.strip())
    return None
