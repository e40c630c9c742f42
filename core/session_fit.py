"""Bounding a live session: which earlier turns a request carries, and which
dropped exchanges come back as ring entries in its bridging block.

A request is the system prompt, the session's earlier turns and the current
message. When it would go over `session_max_tokens` (estimated at 4
characters a token: cheap, predictable, the same for every provider) or carry
more than `session_max_turns` earlier turns, the oldest exchanges drop out and
the session goes on as if it had started at the oldest exchange it keeps:
that turn gets the `<conversation_history>` block a session opened after a
gap gets, holding the newest `inject_entries` ring entries the kept turns do
not cover (the dropped exchanges, and before them what came before the
session). No extra LLM call: the ring already holds a short entry per exchange.

Once it trims, a session trims down to about two thirds of the budget, so the
next messages again repeat the request before them byte for byte (what
provider prompt caches reuse) instead of rewriting its head on every message.

The block holds the newest entries, with one exception: when the current
message shares a word (4+ letters) with an older dropped exchange and with
none of those newest ones, the newest such older entry takes the oldest place,
so "Soll Mittwoch kommen" still finds the parcel it refers to.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chatbridge.core.memory import HISTORY_TEXTS
from chatbridge.core.models import MemoryEntry, Turn

__all__ = [
    "LOW_WATER",
    "Fitted",
    "choose_entries",
    "estimate_tokens",
    "fit_bridge",
    "fit_session",
    "fits",
    "strip_bridge",
]

CHARS_PER_TOKEN = 4
LOW_WATER = 2 / 3  # a trim keeps the request within this share of the budget

# (entries, message, at) -> the message with its history block; `at` is the
# time for the block's "current time" line, None for now.
Bridge = Callable[[Sequence[MemoryEntry], str, float | None], str]

_CLOSE = "\n</conversation_history>\n\n"
_WORD = re.compile(r"\w{4,}")


@dataclass(frozen=True, slots=True)
class Fitted:
    """What one request carries: earlier `turns` and the current `content`.

    `rewritten` says the turns differ from the stored session's (its head
    changed): the commit must then write the session's turns anew.
    """

    turns: list[Turn]
    content: str
    rewritten: bool


def estimate_tokens(*texts: str) -> int:
    """About 4 characters a token, rounded up."""
    return estimate_chars(sum(len(text) for text in texts))


def estimate_chars(count: int) -> int:
    """`estimate_tokens` of texts `count` characters long together."""
    return -(-count // CHARS_PER_TOKEN)


def strip_bridge(content: str) -> str:
    """A user turn without the history block a session's first turn carries."""
    if not content.startswith("<conversation_history>\n"):
        return content
    _, closed, rest = content.partition(_CLOSE)
    if not closed:
        return content
    _, _, labelled = rest.partition("\n")  # after the current-time line
    for texts in HISTORY_TEXTS.values():
        if labelled.startswith(f"{texts.current_message} "):
            return labelled[len(texts.current_message) + 1 :]
    return content


@functools.lru_cache(maxsize=256)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold()))


def choose_entries(
    candidates: Sequence[MemoryEntry], message: str, count: int
) -> list[MemoryEntry]:
    """The newest `count` candidates (oldest first), one of them possibly
    swapped for an older one the message refers to (see the module docstring)."""
    if count <= 0:
        return []
    newest, older = list(candidates[-count:]), candidates[:-count]
    if not older:
        return newest
    # The message's words none of the newest entries has: the few of them
    # are taken out of a copy by each entry's words (no union of all those).
    asked = set(_words_of(message))
    for e in newest:
        asked.difference_update(_words_of(e.user_message))
        asked.difference_update(_words_of(e.assistant_summary))
        if not asked:
            return newest
    for entry in reversed(older):
        said, answered = _words_of(entry.user_message), _words_of(entry.assistant_summary)
        if not (asked.isdisjoint(said) and asked.isdisjoint(answered)):
            return [entry, *newest[1:]]
    return newest


class _Ring:
    """The visible ring, split by how many of the session's newest exchanges are kept."""

    __slots__ = ("_entries", "_own")

    def __init__(self, entries: Sequence[MemoryEntry], key: str, started_at: float) -> None:
        """`entries` are visible to this conversation, oldest first; the
        session's own (`key`, since `started_at`) are found once, not per count."""
        self._entries = entries
        self._own = [e for e in entries if e.session_name == key and e.timestamp >= started_at]

    def dropped(self, kept: int) -> tuple[list[MemoryEntry], float | None]:
        """Entries the newest `kept` exchanges do not cover, and the time of
        the oldest kept exchange (its ring entry's)."""
        covered = self._own[-kept:] if kept else []
        if not covered:
            return list(self._entries), None
        ids = {id(e) for e in covered}
        rest = [e for e in self._entries if id(e) not in ids]
        return rest, covered[0].timestamp


def fits(
    turns: Sequence[Turn], message: str, *, system: str, max_tokens: int, max_turns: int
) -> bool:
    """True when the session goes out as it is: no trim, so no ring read."""
    return len(turns) <= max_turns and _tokens(system, turns, message) <= max_tokens


def _tokens(system: str, turns: Sequence[Turn], message: str) -> int:
    """The estimate for a request of `turns` and `message` as they are."""
    return estimate_tokens(system, *(turn.content for turn in turns), message)


def fit_session(
    turns: Sequence[Turn],
    message: str,
    *,
    system: str,
    ring: Sequence[MemoryEntry],
    key: str,
    started_at: float,
    max_tokens: int,
    max_turns: int,
    inject_entries: int,
    bridge: Bridge,
) -> Fitted:
    """The turns and content of a request continuing a live session with `message`.

    `ring` is the ring visible to this conversation, oldest first. The system
    prompt and the message always stay, even alone over the budget.
    """
    over = _tokens(system, turns, message) > max_tokens
    if len(turns) <= max_turns and not over:  # `fits`, with `over` kept for below
        return Fitted(list(turns), message, False)
    by_count = min(len(turns) // 2, max_turns // 2)
    target = int(max_tokens * LOW_WATER) if over else max_tokens
    visible = _Ring(ring, key, started_at)

    built: dict[int, Fitted] = {}  # the second limit reuses the first's candidates

    def keep(kept: int) -> Fitted:
        if kept not in built:
            built[kept] = _keep(turns, kept, message, visible, inject_entries, bridge)
        return built[kept]

    # Down to the low-water mark if some turns still fit there, else as many
    # as fit within the budget.
    for limit in (target, max_tokens) if target < max_tokens else (target,):
        fitted = _newest_within(turns, limit, message, system=system, by_count=by_count, keep=keep)
        if fitted is not None:
            return fitted
    candidates, _ = visible.dropped(0)
    entries = choose_entries(candidates, message, inject_entries)
    content = fit_bridge(entries, message, system=system, max_tokens=max_tokens, bridge=bridge)
    return Fitted([], content, bool(turns))


def _newest_within(
    turns: Sequence[Turn],
    limit: int,
    message: str,
    *,
    system: str,
    by_count: int,
    keep: Callable[[int], Fitted],
) -> Fitted | None:
    """The request keeping the most exchanges (at most `by_count`) within
    `limit` tokens; None when even one is over it.

    A candidate's turns after its head, with the system prompt and the
    message, are a floor on its size whatever block its head gets, so a
    count over `limit` by these alone is passed over without building its
    block (with an echoing provider most counts are).
    """
    after_head = _suffix_chars(turns)
    floor = len(system) + len(message)
    for kept in range(by_count, 0, -1):
        head = len(turns) - 2 * kept
        if turns[head].role != "user":
            continue  # a damaged session may not alternate
        if estimate_chars(floor + after_head[head + 1]) > limit:
            continue
        fitted = keep(kept)
        # Its size: what the floor counted, and the head as `keep` made it.
        if estimate_chars(floor + len(fitted.turns[0].content) + after_head[head + 1]) <= limit:
            return fitted
    return None


def fit_bridge(
    entries: Sequence[MemoryEntry], message: str, *, system: str, max_tokens: int, bridge: Bridge
) -> str:
    """`message` with the block of `entries`, the oldest left out while over the budget."""
    for start in range(len(entries)):
        content = bridge(entries[start:], message, None)
        if estimate_tokens(system, content) <= max_tokens:
            return content
    return message


def _keep(
    turns: Sequence[Turn],
    kept: int,
    message: str,
    ring: _Ring,
    inject_entries: int,
    bridge: Bridge,
) -> Fitted:
    """The request keeping the newest `kept` exchanges, the block on the head."""
    if not kept:
        return Fitted([], message, bool(turns))
    tail = list(turns[len(turns) - 2 * kept :])
    candidates, at = ring.dropped(kept)
    entries = choose_entries(candidates, message, inject_entries)
    raw = strip_bridge(tail[0].content)
    head = bridge(entries, raw, at) if entries else raw
    tail[0] = Turn(tail[0].role, head)
    return Fitted(tail, message, True)


def _suffix_chars(turns: Sequence[Turn]) -> list[int]:
    """`[i]` is the characters of `turns[i:]`; one entry past the end (0)."""
    sums = [0] * (len(turns) + 1)
    for index in range(len(turns) - 1, -1, -1):
        sums[index] = sums[index + 1] + len(turns[index].content)
    return sums
