"""Chat platform sections: each one is off until `enabled: true`.

Required-when-enabled checks live in validators so a disabled platform never
demands a token the admin has no reason to have.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator

from ._base import OptionalSecret, Section
from ._duration import Duration
from ._errors import Loc, raise_if

__all__ = [
    "MODE_FROM_ENVIRONMENT",
    "DiscordConfig",
    "PlatformsConfig",
    "SlackConfig",
    "TelegramConfig",
]

MODE_FROM_ENVIRONMENT = "mode_from_environment"
"""Validation-context key: the dotted sections whose mode keys came from the
environment's defaults (the file set none of them; `_env.mode_defaults`)."""

_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
MAX_SHARDS = 65_536
"""Far above any Discord bot's shard count; bounds the numbers before they are used."""
_ShardId = Annotated[int, Field(ge=0, lt=MAX_SHARDS)]


class TelegramConfig(Section):
    """Telegram Bot API, by long polling or by webhook."""

    enabled: bool = False
    """Off by default so a fresh install starts without any chat network."""
    token: OptionalSecret = None
    """Bot token from @BotFather; required when enabled."""
    mode: Literal["polling", "webhook"] = "polling"
    """`polling` needs no public URL; `webhook` needs `webhook_url` and `webhook_secret`."""
    base_url: str = "https://api.telegram.org/bot"
    """Bot API root; change it for a self-hosted Bot API server or a test double."""
    webhook_url: str = ""
    """Public HTTPS URL Telegram posts updates to (webhook mode)."""
    webhook_secret: OptionalSecret = None
    """Shared secret Telegram sends back, so forged updates are rejected (webhook mode)."""
    edit_interval: Duration = 1.0
    """Minimum gap between streamed message edits per chat; Telegram rate-limits edits."""
    drafts: bool = True
    """In private chats an answer streams as a draft (`sendMessageDraft`, paced by
    `edit_interval`), then goes out as new messages, never edited; groups keep edits.
    A chat whose Bot API server refuses drafts falls back to edits (logged once)."""

    @property
    def official_api(self) -> bool:
        """True when `base_url` is Telegram's own Bot API server."""
        return self.base_url.startswith("https://api.telegram.org/")

    @model_validator(mode="after")
    def _check(self) -> TelegramConfig:
        issues: list[tuple[Loc, str]] = []
        if self.enabled and self.token is None:
            issues.append((("token",), "required when telegram is enabled"))
        if self.enabled and self.mode == "webhook":
            if not self.webhook_url:
                issues.append((("webhook_url",), "required in webhook mode"))
            elif self.official_api and not self.webhook_url.startswith("https://"):
                # A self-hosted Bot API server may post to plain http; Telegram's won't.
                issues.append((("webhook_url",), "Telegram only posts to https:// URLs"))
            secret = self.webhook_secret
            if secret is None:
                issues.append((("webhook_secret",), "required in webhook mode"))
            elif not _TELEGRAM_SECRET.fullmatch(secret.get_secret_value()):
                issues.append(
                    (("webhook_secret",), "use 1-256 characters from A-Z, a-z, 0-9, '_' and '-'")
                )
        raise_if(issues)
        return self


class DiscordConfig(Section):
    """Discord gateway bot."""

    enabled: bool = False
    """Off by default so a fresh install starts without any chat network."""
    token: OptionalSecret = None
    """Bot token from the Discord developer portal; required when enabled."""
    api_base: str = "https://discord.com/api/v10"
    """REST root; a proxy or a local test server works too."""
    gateway_url: str = "wss://gateway.discord.gg"
    """Gateway websocket URL for the first connect (resumes use the URL Discord sends)."""
    edit_interval: Duration = 1.0
    """Minimum gap between streamed edits of one message; Discord rate-limits edits."""
    thread_per_mention: bool = False
    """Answer a mention in a channel in a new thread (needs Create Public Threads)."""
    shard_count: int | None = Field(default=None, le=MAX_SHARDS)
    """Total shards across all replicas; unset runs one unsharded connection."""
    shard_ids: tuple[_ShardId, ...] | None = None
    """The shards this process runs (each below `shard_count`); unset: all of them."""

    @model_validator(mode="after")
    def _check(self) -> DiscordConfig:
        issues: list[tuple[Loc, str]] = []
        if self.enabled and self.token is None:
            issues.append((("token",), "required when discord is enabled"))
        if self.shard_count is not None and self.shard_count < 1:
            issues.append((("shard_count",), "must be at least 1"))
        elif self.shard_ids is not None:
            if self.shard_count is None:
                issues.append((("shard_ids",), "needs shard_count"))
            elif any(not 0 <= i < self.shard_count for i in self.shard_ids):
                issues.append((("shard_ids",), f"each id must be 0..{self.shard_count - 1}"))
        raise_if(issues)
        return self


class SlackConfig(Section):
    """Slack app, over Socket Mode (`app_token`) or HTTP events (`signing_secret`)."""

    enabled: bool = False
    """Off by default so a fresh install starts without any chat network."""
    bot_token: OptionalSecret = None
    """`xoxb-` bot token used for Web API calls; required when enabled."""
    app_token: OptionalSecret = None
    """`xapp-` app-level token; when set, events arrive over Socket Mode (no public URL)."""
    signing_secret: OptionalSecret = None
    """Verifies HTTP event requests; used when `app_token` is not set."""
    base_url: str = "https://slack.com/api/"
    """Web API root; overridable for tests."""
    edit_interval: Duration = 1.0
    """Minimum gap between two `chat.update` calls on one streamed message (Slack's
    tier-3 limit is ~50 updates a minute per app)."""
    native_stream: bool = True
    """Thread replies (a channel mention's thread, an assistant thread) stream with
    `chat.startStream`/`appendStream`/`stopStream`; `false`, a plain DM answer, or a
    workspace that refuses streams uses `chat.postMessage` + `chat.update`."""

    _mode_from_environment: bool = PrivateAttr(default=False)

    @property
    def socket_mode(self) -> bool:
        """Socket Mode wins when both are set: it needs no inbound port."""
        return self.app_token is not None

    @property
    def mode_reason(self) -> str:
        """Why `socket_mode` is what it is, for the start-up log line."""
        if self._mode_from_environment:
            variable = "SLACK_APP_TOKEN" if self.socket_mode else "SLACK_SIGNING_SECRET"
            return (
                f"{variable} from the environment: the config sets neither app_token "
                "nor signing_secret"
            )
        if not self.socket_mode:
            return "the config sets signing_secret and no app_token"
        if self.signing_secret is not None:
            return "the config sets app_token, which wins over signing_secret"
        return "the config sets app_token"

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> SlackConfig:
        from_env = (info.context or {}).get(MODE_FROM_ENVIRONMENT) or ()
        # Only an enabled section has a mode (and a disabled one stays equal to the default).
        self._mode_from_environment = self.enabled and "platforms.slack" in from_env
        issues: list[tuple[Loc, str]] = []
        if self.enabled and self.bot_token is None:
            issues.append((("bot_token",), "required when slack is enabled"))
        if self.enabled and self.app_token is None and self.signing_secret is None:
            issues.append(
                (("app_token",), "set app_token (Socket Mode) or signing_secret (HTTP mode)")
            )
        raise_if(issues)
        return self


class PlatformsConfig(Section):
    """Which chat networks to connect to."""

    telegram: TelegramConfig = TelegramConfig()
    """Telegram bot settings."""
    discord: DiscordConfig = DiscordConfig()
    """Discord bot settings."""
    slack: SlackConfig = SlackConfig()
    """Slack app settings."""

    @property
    def enabled(self) -> tuple[str, ...]:
        """Names of the enabled platforms, in a fixed order."""
        flags = {
            "telegram": self.telegram.enabled,
            "discord": self.discord.enabled,
            "slack": self.slack.enabled,
        }
        return tuple(name for name, enabled in flags.items() if enabled)
