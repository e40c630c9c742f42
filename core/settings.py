"""The engine's settings: plain values the composition root takes from the config."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from chatbridge.core.media._settings import MediaSettings
from chatbridge.core.texts import say

__all__ = ["EngineSettings"]


@dataclass(frozen=True, slots=True)
class EngineSettings:
    system_prompt: str = "You are a helpful assistant."
    language: str = "de"
    timezone: tzinfo | None = None
    session_ttl: float = 30 * 60
    session_max_turns: int = 40
    session_max_tokens: int = 3000
    """About this many tokens (4 characters each) per request at most: older
    turns drop out, their exchanges come back as ring entries (`core.session_fit`)."""
    cancel_on_new_message: bool = False
    max_age: float = 24 * 3600
    user_chars: int = 500
    summary_chars: int = 300
    max_message_chars: int = 8000
    """A longer message reaches the provider cut to this many characters, with
    a note saying so (`incoming.cut_for_prompt`); the ring keeps `user_chars`."""
    inject_entries: int = 5
    redeliver_within: float = 15 * 60
    """A message still unanswered this long after it arrived (the bot was down)
    gets a short notice instead of a late answer."""
    media: MediaSettings = field(default_factory=MediaSettings)
    """What happens to photos, voice messages and files (`core.media`)."""

    def say(self, key: str, **values: object) -> str:
        """One of the bot's own sentences, in `language`."""
        return say(self.language, key, **values)

    def today(self, now: float) -> str:
        """YYYY-MM-DD in the bot's timezone, for usage accounting."""
        return _day_of(int(now // 1), self.timezone)


@functools.lru_cache(maxsize=16)
def _day_of(second: int, tz: tzinfo | None) -> str:
    """`today` of a whole second (a day starts at one; UTC offsets are whole
    seconds): every message of one second asks it once."""
    return datetime.fromtimestamp(second, tz).date().isoformat()
