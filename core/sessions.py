"""Live sessions: a small write-through cache in front of the store."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from core.models import Session, Turn
from core.store.base import Store

__all__ = ["SessionCache", "append_turns"]


class SessionCache:
    """Recently used sessions in memory; the store stays the source of truth.

    Bounded (least recently used out) so 100k idle conversations cost no RAM.
    """

    def __init__(self, store: Store, *, max_size: int = 4096) -> None:
        self._store = store
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._max_size = max_size

    async def get(self, key: str) -> Session | None:
        session = self._sessions.get(key)
        if session is not None:
            self._sessions.move_to_end(key)
            return session
        session = await self._store.load_session(key)
        if session is not None:
            self.remember(session)
        return session

    def remember(self, session: Session) -> None:
        self._sessions[session.key] = session
        self._sessions.move_to_end(session.key)
        while len(self._sessions) > self._max_size:
            self._sessions.popitem(last=False)

    async def drop(self, key: str) -> None:
        self._sessions.pop(key, None)
        await self._store.save_session(None, key=key)

    def drop_user(self, user: str) -> None:
        """Forget cached sessions of a ring owner (the store erases its own)."""
        for key in [k for k, s in self._sessions.items() if s.user == user]:
            del self._sessions[key]


def append_turns(session: Session, turns: list[Turn], *, now: float, max_turns: int) -> Session:
    """A new session value with `turns` added and the oldest dropped past `max_turns`.

    Turns are dropped in user/assistant pairs so the roles keep alternating.
    """
    kept = [*session.turns, *turns]
    excess = len(kept) - max_turns
    if excess > 0:
        kept = kept[excess + (excess % 2) :]
    return replace(session, turns=kept, last_active=now)
