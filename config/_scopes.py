"""The `scopes:` section: settings for one place, most specific match wins, key by key.

A scope ID names a place: a whole platform (`telegram`), a chat or channel
(`telegram:-100123`, `discord:2345…`, `slack:C0TEAM`) or a server/workspace
(`discord:guild:1234…`, `slack:team:T0123`). `ScopeSettings` lists every key
a scope may set; each field is one line, its `TopLevel` marker saying which
top-level setting it overrides (shown as the source by `config explain`).
Adding a per-scope key is one field here; the resolver in `core.places`
carries every field through without knowing its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from ._base import Section
from ._duration import Duration
from ._limits import LimitValues
from ._shown import shown

__all__ = [
    "SCOPE_PLATFORMS",
    "ScopeId",
    "ScopeSettings",
    "TopLevel",
    "check_scope_id",
    "empty_scopes_as_mappings",
    "scope_platform",
    "top_level_of",
]

SCOPE_PLATFORMS = ("telegram", "discord", "slack")
MAX_ENTRIES = 10_000


@dataclass(frozen=True, slots=True)
class TopLevel:
    """Where a scope key's value comes from when no scope sets it: a dotted
    config path, or None for a built-in `default` (no top-level key)."""

    path: str | None
    default: object = None


class ScopeSettings(Section):
    """What one scope may set; a key left out comes from the next scope out."""

    system_prompt: Annotated[str | None, TopLevel("bot.system_prompt")] = None
    """The system prompt in this place."""
    provider: Annotated[str | None, TopLevel("providers.default")] = None
    """A `providers` entry; the `providers.fallback` chain still follows it."""
    model: Annotated[str | None, TopLevel("providers.<provider>.model")] = None
    """That provider's model, here only (else the entry's own `model`)."""
    language: Annotated[Literal["de", "en"] | None, TopLevel("bot.language")] = None
    """Language of the bot's own sentences and the history headings."""
    session_ttl: Annotated[Duration | None, TopLevel("engine.session_ttl")] = None
    """Idle time after which the next message opens a new LLM session."""
    session_max_turns: Annotated[
        int | None, TopLevel("engine.session_max_turns"), Field(ge=2, le=MAX_ENTRIES)
    ] = None
    """Older turns drop out of the live session past this many."""
    inject_entries: Annotated[
        int | None, TopLevel("memory.inject_entries"), Field(ge=0, le=MAX_ENTRIES)
    ] = None
    """Ring entries bridged into a new session here; 0: none."""
    require_mention: Annotated[bool | None, TopLevel(None, default=True)] = None
    """In groups/channels: answer only when mentioned or replied to (default true)."""
    limits: Annotated[LimitValues | None, TopLevel(None)] = None
    """One pool shared by everyone in this place (on top of each person's own
    limits); it belongs to the scope that sets it, so a channel inheriting its
    server's `limits` draws on the server's pool. No top-level setting."""


def top_level_of(key: str) -> TopLevel:
    """The `TopLevel` marker of a `ScopeSettings` field."""
    for meta in ScopeSettings.model_fields[key].metadata:
        if isinstance(meta, TopLevel):
            return meta
    return TopLevel(None)


_CHAT = {
    "telegram": re.compile(r"-?\d{1,20}"),
    "discord": re.compile(r"\d{1,20}"),
    "slack": re.compile(r"[CGD][A-Z0-9]{2,30}"),
}
_SERVER = {"discord": re.compile(r"\d{1,20}"), "slack": re.compile(r"T[A-Z0-9]{2,30}")}
_SERVER_WORD = {"discord": "guild", "slack": "team"}
_FORMS = (
    "telegram, telegram:CHAT_ID, discord, discord:guild:ID, discord:CHANNEL_ID, "
    "slack, slack:team:T…, slack:C… (a channel ID)"
)


def check_scope_id(value: Any) -> str:
    """A well-formed scope ID, or ValueError with one sentence saying why not."""
    if not isinstance(value, str):
        raise ValueError(f"a scope ID is text such as telegram:-100123, got {shown(value)}")
    text = value.strip()
    platform, _, rest = text.partition(":")
    if platform not in SCOPE_PLATFORMS:
        raise ValueError(f"malformed scope ID {shown(text)}; use one of: {_FORMS}")
    if not rest:
        return text
    word = _SERVER_WORD.get(platform)
    head, sep, server = rest.partition(":")
    if word is not None and sep and head == word:
        if _SERVER[platform].fullmatch(server):
            return text
        kind = "a team ID (T…)" if platform == "slack" else "digits"
        raise ValueError(f"malformed scope ID {shown(text)}; {platform}:{word}: takes {kind}")
    if _CHAT[platform].fullmatch(rest):
        return text
    hint = {
        "telegram": "telegram: takes the chat's numeric ID (groups start with -100)",
        "discord": "discord: takes a channel ID (digits) or guild:ID",
        "slack": "slack: takes a channel ID (C…, G…, D…), not its name, or team:T…",
    }[platform]
    raise ValueError(f"malformed scope ID {shown(text)}; {hint}")


def scope_platform(scope_id: str) -> str:
    """`telegram` for `telegram:-100123`."""
    return scope_id.partition(":")[0]


def empty_scopes_as_mappings(value: Any) -> Any:
    """`telegram:` with nothing below is a scope that sets nothing."""
    if isinstance(value, dict):
        return {key: {} if entry is None else entry for key, entry in value.items()}
    return value


ScopeId = Annotated[str, BeforeValidator(check_scope_id)]
"""A validated scope ID (see the module docstring)."""
