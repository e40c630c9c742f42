"""The JSON store's inbox (see `core.ports.store.Inbox`): its entries in the
state file's `"inbox"` (pending, in insertion order) and `"inbox_done"` (each
done key's wall-clock time, pruned after `DEDUPE_WINDOW` by the next add).

Each change is made in memory and returns how to undo it, or None when there
was nothing to change; the store writes the state file and calls the undo if
that write fails (`JsonStore._write_state`), as SQLite's parts run inside the
store's transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from chatbridge.core.models import Conversation, InboxEntry
from chatbridge.core.ports.store import DEDUPE_WINDOW
from chatbridge.stores._codec import answer_to_json, inbox_to_json, sent_to_json
from chatbridge.stores.json._files import State, put

__all__ = ["Undo", "add", "mark_done", "pending", "pending_of", "progress"]

Undo = Callable[[], None]


def add(state: State, entry: InboxEntry) -> Undo | None:
    """Add `entry`, dropping done markers older than `DEDUPE_WINDOW` before its
    `received_at`; None (nothing changed) when its key is pending or was done
    within the window."""
    inbox_to_json(entry)  # TypeError for a field of the wrong type, before any change
    cutoff = entry.received_at - DEDUPE_WINDOW
    done_at = state.inbox_done.get(entry.key)
    if entry.key in state.inbox or (done_at is not None and done_at >= cutoff):
        return None
    done = state.inbox_done
    state.inbox_done = {k: at for k, at in done.items() if at >= cutoff}
    state.inbox[entry.key] = entry

    def undo() -> None:
        del state.inbox[entry.key]
        state.inbox_done = done

    return undo


def progress(state: State, key: str, sent: tuple[str, ...], answer: str | None) -> Undo | None:
    """Record what was posted and the answer (`None` keeps a recorded one)."""
    old = state.inbox.get(key)
    if old is None:
        return None
    refs, answer = tuple(sent_to_json(sent)), answer_to_json(answer)  # TypeError first
    answer = old.answer if answer is None else answer
    state.inbox[key] = replace(old, sent=refs, answer=answer)  # keeps its place

    def undo() -> None:
        state.inbox[key] = old

    return undo


def mark_done(state: State, key: str) -> Undo | None:
    """Mark a pending `key` done in memory (dropping its text); returns how to
    undo that, or None if `key` is empty or not pending."""
    if not key or key not in state.inbox:
        return None
    inbox, before = dict(state.inbox), state.inbox_done.get(key)  # pending: a few entries
    del state.inbox[key]
    state.inbox_done[key] = time.time()

    def undo() -> None:
        state.inbox = inbox  # the entry back in its place, so ties keep their order
        put(state.inbox_done, key, before)

    return undo


def pending(state: State) -> list[InboxEntry]:
    """Oldest `received_at` first; `sorted` is stable, so ties keep insertion order."""
    return sorted(state.inbox.values(), key=lambda e: e.received_at)


def pending_of(state: State, conversation: Conversation) -> list[InboxEntry]:
    """The conversation's pending entries, oldest first: a filter in memory
    (one process only, and its pending entries are few)."""
    mine = [e for e in state.inbox.values() if e.message.conversation == conversation]
    return sorted(mine, key=lambda e: e.received_at)
