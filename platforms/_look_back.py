"""What the Slack and Discord outboxes share to "look before posting again".

A process killed between the platform taking a message and the store
recording its reference leaves that message unknown after the restart
(`core.ports.PostedLookup`). Only a question some earlier process (or
another replica) held in the inbox can have been answered before; a
question this process took into the inbox as new cannot. So an answer to a
message taken here costs no lookup, and every other answer (resumed after a
restart, taken over from another replica) costs one history read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Iterable

from chatbridge.core.ports import Found, SentMessage
from chatbridge.platforms._runtime import Taken

__all__ = ["LOOK_LIMIT", "TakenHere", "judge"]

LOOK_LIMIT = 100  # messages read after the question: the answer follows it closely


class TakenHere:
    """Event ids this process took into the inbox as new (the newest `limit`)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    async def take(self, event_id: str, taking: Awaitable[Taken]) -> Taken:
        """Await `taking` (the hand-over to the inbox) and remember `event_id` if it
        was new. Marked before, since its answer may start at once."""
        known = event_id in self._ids
        self.add(event_id)
        taken = await taking
        if taken is not Taken.NEW and not known:
            self.discard(event_id)
        return taken

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def discard(self, event_id: str) -> None:
        """The inbox held it already (or refused it): it is not new here."""
        self._ids.pop(event_id, None)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids


def _words(text: str) -> str:
    return " ".join(text.split())


def judge(mine: Iterable[tuple[SentMessage, str]], candidates: Iterable[str]) -> Found:
    """Among the bot's own messages after the question (`mine`, oldest first,
    as (SentMessage, text shown)), the first whose text begins one of
    `candidates` (the text about to be posted, raw and as the platform renders
    it), whitespace aside. A message that a candidate begins but does not reach
    is `ahead`: the same answer further on, or another answer beginning alike,
    which only more text tells apart."""
    texts = [t for t in (_words(c) for c in candidates) if t]
    ahead = False
    for sent, shown in mine:
        found = _words(shown)
        if not found:
            continue
        if any(text.startswith(found) for text in texts):
            return Found(sent)
        ahead = ahead or any(found.startswith(text) for text in texts)
    return Found(ahead=ahead)
