"""`chatbridge config explain --chat PLACE`: the settings in force in one place.

One line per per-scope setting, `KEY: VALUE (SOURCE)`, SOURCE being the scope
ID or the config section it comes from, resolved by the same `ScopeResolver`
the engine uses. A place is a scope ID (`telegram:-100123`, `discord:2345…`,
`slack:C0TEAM`, also `discord:guild:ID`, `slack:team:T…` or a platform) with
an optional `/thread:ID`. A channel's server/workspace is asked of the
platform with the configured token (each platform package's `locate`), if
the platform is enabled; when that fails, the lines a server scope could
still set say `server unknown`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from chatbridge.config import ChatbridgeConfig, ScopeSettings, check_scope_id
from chatbridge.core.app.registry import bind
from chatbridge.core.app.scopes import resolver_from_config
from chatbridge.core.app.wiring import choose_provider, settings_from_config
from chatbridge.core.places import PlaceSettings
from chatbridge.core.texts import human_duration

__all__ = ["BadPlace", "Place", "explain", "parse_place"]

_THREAD = {
    "telegram": re.compile(r"\d{1,20}"),
    "discord": re.compile(r"\d{1,20}"),
    "slack": re.compile(r"\d{1,20}(?:\.\d{1,10})?"),
}
_SERVER_PLATFORMS = ("discord", "slack")


class BadPlace(ValueError):
    """The place is malformed; `str()` is one sentence."""


@dataclass(frozen=True, slots=True)
class Place:
    platform: str
    scope_id: str  # the place as written, without its thread
    chat: str  # "" for a platform or a server
    thread: str = ""


def parse_place(text: str) -> Place:
    """`discord:234…/thread:567…` -> Place; `BadPlace` with one sentence otherwise."""
    head, sep, tail = text.strip().partition("/")
    try:
        scope_id = check_scope_id(head)
    except ValueError as exc:
        raise BadPlace(str(exc)) from None
    platform, _, rest = scope_id.partition(":")
    is_chat = bool(rest) and not rest.startswith(("guild:", "team:"))
    thread = ""
    if sep:
        word, _, thread = tail.partition(":")
        if word != "thread" or not is_chat or not _THREAD[platform].fullmatch(thread):
            raise BadPlace(
                f"malformed place {text.strip()!r}; a thread is written CHANNEL/thread:ID "
                f"(like discord:234567890123456789/thread:345678901234567890)"
            )
    return Place(platform, scope_id, rest if is_chat else "", thread)


async def chain_of(place: Place, config: ChatbridgeConfig) -> tuple[tuple[str, ...], bool]:
    """The place's scope chain and whether its server is known."""
    platform = place.platform
    if not place.chat:
        server = place.scope_id if place.scope_id != platform else ""
        return tuple(s for s in (server, platform) if s), True
    found = None
    if platform in config.platforms.enabled:  # a disabled platform is not asked
        found = await bind(platform, config.platforms).locate(place.chat, place.thread)
    if found is not None:
        return tuple(found), True
    fallback = [place.scope_id, platform]
    if place.thread and platform == "discord":
        fallback.insert(0, f"discord:{place.thread}")
    return tuple(fallback), platform not in _SERVER_PLATFORMS


def shown(value: object) -> str:
    """A value on one line: prose quoted (newlines escaped), durations as `10m`."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return human_duration(value)
    if isinstance(value, str):
        plain = value and not any(ch.isspace() or ch in "\"'#" for ch in value)
        return value if plain else json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return json.dumps(dict(value), ensure_ascii=False, default=str)
    return str(value)


def lines_of(settings: PlaceSettings, *, own: tuple[str, ...], server_known: bool) -> list[str]:
    """`KEY: VALUE (SOURCE)` per per-scope key; `own` are the place's own
    scope IDs (channel, thread), which no server scope could override."""
    lines = []
    for key in ScopeSettings.model_fields:
        source = settings.sources.get(key, "")
        if not server_known and source not in own:
            source += "; server unknown"
        lines.append(f"{key}: {shown(settings.values.get(key))} ({source})")
    return lines


async def explain(config: ChatbridgeConfig, place: Place, environ: Mapping[str, str]) -> str:
    """The lines `config explain` prints for `place`."""
    chain, server_known = await chain_of(place, config)
    choice = choose_provider(config, environ)
    try:
        settings = settings_from_config(config)
        resolver, pool = resolver_from_config(config, settings=settings, provider=choice.provider)
        resolved = resolver.resolve(chain)
        own = tuple(s for s in chain if not s.startswith(("discord:guild:", "slack:team:")))
        own = tuple(s for s in own if s != place.platform)
        lines = lines_of(resolved, own=own, server_known=server_known)
        await pool.aclose()
    finally:
        await choice.provider.aclose()
    return "\n".join(lines)
