"""Live sessions: how a session grows by one exchange.

Sessions are read from the store on every message rather than cached, so a
`chatbridge memory forget` run from another process takes effect at once and
several replicas can share one store. (An indexed read costs microseconds.)
"""

from __future__ import annotations

from chatbridge.core.models import Session, Turn

__all__ = ["append_turns"]


def append_turns(session: Session, turns: list[Turn], *, now: float, max_turns: int) -> Session:
    """A new session value with `turns` added and the oldest dropped past `max_turns`.

    Turns are dropped in user/assistant pairs so the roles keep alternating.
    """
    kept = [*session.turns, *turns]
    excess = len(kept) - max_turns
    if excess > 0:
        kept = kept[excess + (excess % 2) :]
    return Session(session.key, session.user, session.started_at, now, kept)
