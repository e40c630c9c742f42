"""The root model and the small sections; providers and platforms have their own modules."""

from __future__ import annotations

import zoneinfo
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ._base import Section
from ._duration import Duration, LongDuration
from ._errors import ConfigIssue, Loc, raise_if
from ._ids import AccessEntry, IdentityName, UserId
from ._limits import LimitsConfig, usd_limit_issues
from ._media import MediaConfig
from ._platforms import PlatformsConfig
from ._providers import ProvidersConfig, did_you_mean
from ._scopes import ScopeId, ScopeSettings, empty_scopes_as_mappings
from ._urls import url_is_usable

__all__ = [
    "BASE_DIR",
    "WITHOUT_PROVIDERS",
    "AccessConfig",
    "BotConfig",
    "ChatbridgeConfig",
    "EngineConfig",
    "MemoryConfig",
    "ServerConfig",
]


BASE_DIR = "base_dir"
WITHOUT_PROVIDERS = "without_providers"
"""Validation context flag: `only=` left the providers section out (chatbridge
usage), so scopes' `provider`/`model` have nothing to be checked against."""
"""Validation-context key: the config file's directory, for relative paths in it."""

MAX_ENTRIES = 10_000
"""Bound on ring sizes and counts: far above any real use, far below any overflow."""
MAX_CHARS = 100_000
"""Bound on stored text lengths."""


class BotConfig(Section):
    """How the assistant presents itself."""

    system_prompt: str = "You are a helpful assistant."
    """System prompt sent with every LLM request."""
    language: Literal["de", "en"] = "de"
    """Language of the headings around injected history, matching the users' language."""
    timezone: str = ""
    """IANA zone for timestamps shown to the LLM; "" uses the machine's local zone."""

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        """Fail at startup, not at the first message that needs a timestamp."""
        if not value:
            return value
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            hint = did_you_mean(value, sorted(zoneinfo.available_timezones()))
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name like Europe/Berlin){hint}"
            ) from None
        return value


class EngineConfig(Section):
    """Session lifetime and concurrency of the conversation engine."""

    session_ttl: Duration = 1800.0
    """Idle time after which the next message starts a fresh LLM session."""
    session_max_turns: int = Field(default=40, ge=2, le=MAX_ENTRIES)
    """Older turns drop out of the live session, bounding prompt size and cost."""
    session_max_tokens: int = Field(default=3000, ge=100, le=2_000_000)
    """The same by size: earlier turns drop out until a request, its returning
    block included, is within about this many tokens (4 characters a token)."""
    on_new_message: Literal["queue", "cancel"] = "queue"
    """`cancel`: a newer message in the same conversation cancels the reply in flight."""
    shutdown_grace: Duration = 10.0
    """How long `run` waits for replies in flight after SIGTERM."""
    redeliver_within: Duration = 900.0
    """A message still unanswered this long after it arrived (the bot was down)
    gets a short notice after the restart instead of a late answer."""
    max_message_chars: int = Field(default=8000, ge=200, le=200_000)
    """Longer messages are cut before the provider, with a note in the prompt."""
    lease_ttl: Duration = Field(default=30.0, ge=1.0, le=600.0)
    """Replicas on Redis: how long a conversation stays blocked when the replica
    answering it died (its lease expires); live holders extend it every third."""


class MemoryConfig(Section):
    """The per-person memory ring that outlives LLM sessions."""

    backend: Literal["sqlite", "redis", "json"] = "sqlite"
    """Where the ring is stored; `redis` lets several bot processes share it."""
    path: str = "data/chatbridge.db"
    """SQLite database file, or the JSON file for `json`. A relative path written in
    a config file is relative to that file's directory; the default (not set in
    the file, or no file at all) is relative to the working directory."""
    url: str = "redis://127.0.0.1:6379/0"
    """Redis URL, used only by the `redis` backend."""
    max_entries: int = Field(default=20, ge=1, le=MAX_ENTRIES)
    """Entries kept per person; older ones are forgotten."""
    max_age: LongDuration = 86400.0
    """Entries older than this are forgotten regardless of count (at most 365d)."""
    user_chars: int = Field(default=500, ge=20, le=MAX_CHARS)
    """Stored length of each user message; bounds storage and injected prompt size."""
    summary_chars: int = Field(default=300, ge=20, le=MAX_CHARS)
    """Stored length of each reply summary."""
    inject_entries: int = Field(default=5, ge=0, le=MAX_ENTRIES)
    """Entries injected into a new session's prompt; 0 disables injection."""

    @field_validator("path")
    @classmethod
    def _relative_to_the_file(cls, value: str, info: ValidationInfo) -> str:
        """Resolve against the file's directory, so the store does not depend on
        where the command runs (`memory forget` from elsewhere must find it)."""
        base = (info.context or {}).get(BASE_DIR)
        if not value.strip() or base is None:
            return value
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else Path(base) / path)

    @model_validator(mode="after")
    def _check(self) -> MemoryConfig:
        issues: list[tuple[Loc, str]] = []
        if self.inject_entries > self.max_entries:
            issues.append(
                (
                    ("inject_entries",),
                    f"must be <= max_entries ({self.max_entries}), got {self.inject_entries}",
                )
            )
        if self.backend in ("sqlite", "json") and not self.path.strip():
            issues.append((("path",), f"required for the {self.backend} backend"))
        if self.backend == "redis" and not self.url.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            issues.append((("url",), "expected a redis://, rediss:// or unix:// URL"))
        elif self.backend == "redis" and not url_is_usable(self.url):
            issues.append((("url",), "the URL cannot be parsed (check host, port and password)"))
        raise_if(issues)
        return self


class AccessConfig(Section):
    """Who may talk to the bot; the console is always allowed."""

    allow: tuple[AccessEntry, ...] = ()
    """Users or chats as `platform:id`, or identity names; empty means nobody."""
    admins: tuple[AccessEntry, ...] = ()
    """Users who may run admin commands, same syntax as `allow`."""


class ServerConfig(Section):
    """The HTTP listener for webhooks and health checks."""

    host: str = "127.0.0.1"
    """Bind address; loopback by default so nothing is exposed by accident."""
    port: int = Field(default=8080, ge=0, le=65535)
    """TCP port; 0 picks a free one (useful in tests)."""


class LoggingConfig(Section):
    """What `chatbridge run` logs, and how."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    """`--log-level` and `$CHATBRIDGE_LOG_LEVEL` override it. Tracebacks of
    handled errors appear only at `debug`."""
    format: Literal["text", "json"] = "text"
    """`json`: one object per line (time, level, logger, message), secrets masked."""


class ChatbridgeConfig(Section):
    """The whole configuration file."""

    bot: BotConfig = BotConfig()
    """Persona and locale."""
    engine: EngineConfig = EngineConfig()
    """Session handling."""
    memory: MemoryConfig = MemoryConfig()
    """Cross-session memory ring."""
    providers: ProvidersConfig = ProvidersConfig()
    """LLM endpoints and their failover order."""
    platforms: PlatformsConfig = PlatformsConfig()
    """Chat networks."""
    access: AccessConfig = AccessConfig()
    """Allow list and admins."""
    identities: dict[IdentityName, tuple[UserId, ...]] = Field(default_factory=dict)
    """One person across platforms, sharing one memory ring: name -> platform:id list."""
    server: ServerConfig = ServerConfig()
    """HTTP listener."""
    logging: LoggingConfig = LoggingConfig()
    """Log level and format."""
    scopes: dict[ScopeId, ScopeSettings] = Field(default_factory=dict)
    """Settings for one place (platform, server/workspace, channel/chat); the most
    specific scope matching a message's place wins, key by key."""

    _warnings: tuple[ConfigIssue, ...] = PrivateAttr(default=())

    @property
    def warnings(self) -> tuple[ConfigIssue, ...]:
        """What the loader found worth saying that is no error (`FILE:LINE: key: message`)."""
        return self._warnings

    @field_validator("scopes", mode="before")
    @classmethod
    def _empty_scopes(cls, value: object) -> object:
        return empty_scopes_as_mappings(value)

    media: MediaConfig = MediaConfig()
    """Photos, voice messages and files."""
    limits: LimitsConfig = LimitsConfig()
    """Token, message and cost limits per person (see `LimitValues`)."""

    @model_validator(mode="after")
    def _check_references(self, info: ValidationInfo) -> ChatbridgeConfig:
        """Cross-section checks: access names must be identities, IDs belong to one person."""
        issues: list[tuple[Loc, str]] = []
        names = list(self.identities)
        for field in ("allow", "admins"):
            for index, entry in enumerate(getattr(self.access, field)):
                if ":" not in entry and entry not in self.identities:
                    hint = did_you_mean(entry, names)
                    issues.append((("access", field, index), f"no identity named {entry!r}{hint}"))
        owner: dict[str, str] = {}
        for name, members in self.identities.items():
            for index, member in enumerate(members):
                if member in owner:
                    msg = f"{member} already belongs to identity {owner[member]!r}"
                    issues.append((("identities", name, index), msg))
                owner.setdefault(member, name)
        entries = list(self.providers.entries)
        without_providers = bool((info.context or {}).get(WITHOUT_PROVIDERS))
        for scope_id, scope in () if without_providers else self.scopes.items():
            if scope.provider is not None and scope.provider not in entries:
                known = ", ".join(entries) if entries else "none are configured"
                hint = did_you_mean(scope.provider, entries)
                message = f"no provider named {scope.provider!r}{hint} (known: {known})"
                issues.append((("scopes", scope_id, "provider"), message))
            if scope.model is not None and not entries:
                message = "a scope's model needs a providers entry (none are configured)"
                issues.append((("scopes", scope_id, "model"), message))
        issues += _transcription_issues(self)
        if "providers" in self.model_fields_set:  # `only=` sections leave providers out
            chain = self.providers.chain or tuple(self.providers.entries)
            unpriced = [n for n in chain if self.providers.entries[n].prices is None]
        else:
            unpriced = []
        pools = {sid: sc.limits for sid, sc in self.scopes.items() if sc.limits is not None}
        issues += usd_limit_issues(
            self.limits, unpriced, identities=dict(self.identities), pools=pools
        )
        raise_if(issues)
        return self


def _transcription_issues(config: ChatbridgeConfig) -> list[tuple[Loc, str]]:
    """`media.transcription.provider` must name an `openai` entry."""
    chosen = config.media.transcription
    if chosen is None:
        return []
    entries = config.providers.entries
    where: Loc = ("media", "transcription", "provider")
    if chosen.provider not in entries:
        return [
            (
                where,
                f"no provider entry named {chosen.provider!r}"
                f"{did_you_mean(chosen.provider, list(entries))}",
            )
        ]
    if entries[chosen.provider].type != "openai":
        return [
            (
                where,
                f"provider {chosen.provider!r} is not of type openai "
                "(transcription uses OpenAI's audio API)",
            )
        ]
    return []
