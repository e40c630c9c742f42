"""What became of one inbox entry, and the one place that closes it.

Every path that finishes with an entry (answered, a notice, a refusal, a
command, a failure, a cancel, a late notice, a lost lease) ends in
`Outcomes.close`, so an entry is closed exactly when its outcome says so and
the metrics count the same enum. An unexpected error is `FAILED`: the user
got one sentence and the entry is done, so neither a sweep nor a restart
answers it again.
"""

from __future__ import annotations

import enum
import logging
from typing import Protocol

from chatbridge.core.ports.store import Inbox, StoreError

__all__ = ["Outcome", "Outcomes"]

log = logging.getLogger(__name__)


class Outcome(enum.StrEnum):
    """One entry's outcome; the value is the `outcome` label of the metrics."""

    ANSWERED = "answered"  # answered and remembered; the commit closed the entry
    NOT_STORED = "not_stored"  # answered, but the store refused the exchange
    FAILED = "failed"  # the provider failed, an empty answer, a store or unexpected error
    DENIED = "denied"  # the access list refused the sender
    COMMAND = "command"  # a /command ran
    DUPLICATE = "duplicate"  # a redelivery, or an entry another replica closed
    CANCELLED = "cancelled"  # overtaken by a newer message (cancel mode) or /new
    UNDELIVERED = "undelivered"  # the platform refused the answer
    LATE = "late"  # too old to answer (engine.redeliver_within); a notice instead
    REFUSED = "refused"  # a limit refused it (`core.limits`): one sentence, no model request
    LEFT = "left"  # left pending: a newer lease holder or the restart finishes it

    @property
    def closes(self) -> bool:
        """True when closing must mark the inbox entry done: the commit already
        did for ANSWERED, LEFT keeps it pending, a DUPLICATE is not ours."""
        return self not in (Outcome.ANSWERED, Outcome.LEFT, Outcome.DUPLICATE)


class _Counter(Protocol):
    def count(self, platform: str, outcome: str, *, scope: str = ...) -> None: ...


class Outcomes:
    """Closes entries in the inbox and counts each outcome once."""

    def __init__(self, inbox: Inbox, metrics: _Counter) -> None:
        self._inbox = inbox
        self._metrics = metrics

    async def close(
        self, platform: str, key: str, outcome: Outcome, *, scope: str = "default"
    ) -> None:
        """Mark `key` done if `outcome` closes it, and count it (by scope). A
        store that refuses the write is logged: the entry then stays pending."""
        self._metrics.count(platform, outcome.value, scope=scope)
        if not outcome.closes:
            return
        try:
            await self._inbox.inbox_done(key)
        except StoreError as exc:
            log.error("could not close %s (%s): %s", key, outcome.value, exc)
