"""The threads a bot answered in: follow-ups there need no new mention."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["THREADS_KEPT", "AnsweredThreads"]

_K = TypeVar("_K", bound=Hashable)

THREADS_KEPT = 10_000
"""How many answered threads an adapter remembers: about a day of a busy
workspace's threads, a few hundred kilobytes of keys."""


class AnsweredThreads(Generic[_K]):
    """A bounded memory of answered threads, least recently answered forgotten first.

    In memory only: after a restart (or once a thread was forgotten) a
    follow-up there needs a mention again, which is the safe side: the bot
    never answers chatter it was not asked into. Keys are the platform's
    thread identity (Slack: `(channel, thread_ts)`; Discord: the thread id).
    """

    def __init__(self, limit: int = THREADS_KEPT) -> None:
        self._threads: dict[_K, None] = {}
        self._limit = limit

    def add(self, thread: _K) -> None:
        """Remember `thread` as answered just now (moving it to the newest end)."""
        self._threads.pop(thread, None)
        self._threads[thread] = None
        while len(self._threads) > self._limit:
            del self._threads[next(iter(self._threads))]

    def __contains__(self, thread: object) -> bool:
        return thread in self._threads

    def __iter__(self) -> Iterator[_K]:
        return iter(list(self._threads))

    def __len__(self) -> int:
        return len(self._threads)
