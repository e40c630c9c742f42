"""Images and PDFs stay in a live session for a few messages, in memory only.

The store never holds file bytes: a stored user turn keeps its `[image]`
placeholder text. While the process runs, the parts of the newest turns are
kept here per conversation (one conversation's parts never reach another's
prompt) and put back on the matching turn of the next prompts, for
`KEEP_TURNS` more messages; then the model sees only the placeholder. A
restart, another replica, or the byte budget filling up ends it earlier.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from chatbridge.core.models import MediaPart, Turn

__all__ = ["BUDGET_BYTES", "KEEP_TURNS", "LiveMedia"]

KEEP_TURNS = 3
"""An image is shown to the model with its own message and the next 3."""
BUDGET_BYTES = 64 * 1024 * 1024
"""Base64 bytes kept over all conversations; the oldest go first past it."""


class LiveMedia:
    def __init__(self, *, keep_turns: int = KEEP_TURNS, budget: int = BUDGET_BYTES) -> None:
        self._keep = keep_turns
        self._budget = budget
        # (conversation key, session start, turn content) -> parts, oldest first
        self._parts: OrderedDict[tuple[str, float, str], tuple[MediaPart, ...]] = OrderedDict()

    def remember(
        self, conversation: str, session: float, content: str, parts: tuple[MediaPart, ...]
    ) -> None:
        """Keep `parts` for the user turn `content` of the session of
        `conversation` that started at `session`."""
        if not parts or self._keep <= 0:
            return
        key = (conversation, session, content)
        self._parts[key] = parts
        self._parts.move_to_end(key)
        while self._size() > self._budget and self._parts:
            self._parts.popitem(last=False)

    def attach(self, conversation: str, session: float, turns: Sequence[Turn]) -> tuple[Turn, ...]:
        """`turns` with the kept parts put back on the last `KEEP_TURNS` user turns.

        Parts of older turns, of turns no longer in the session and of any
        other session of the conversation (after `/new`, `/forget`, a TTL
        gap) are dropped: a new session never sees an earlier one's images."""
        if not self._parts:  # nothing kept (no media in any live session): as they are
            return tuple(turns)
        user_turns = [i for i, t in enumerate(turns) if t.role == "user"]
        recent = set(user_turns[-self._keep :]) if self._keep > 0 else set()
        out = list(turns)
        keep: set[tuple[str, float, str]] = set()
        for index in recent:
            key = (conversation, session, turns[index].content)
            parts = self._parts.get(key)
            if parts:
                out[index] = replace(turns[index], parts=parts)
                keep.add(key)
        for key in [k for k in self._parts if k[0] == conversation and k not in keep]:
            del self._parts[key]
        return tuple(out)

    def drop(self, conversation: str) -> None:
        """Forget every part of `conversation` (its provider refused them)."""
        for key in [k for k in self._parts if k[0] == conversation]:
            del self._parts[key]

    def _size(self) -> int:
        return sum(len(p.data) for parts in self._parts.values() for p in parts)
