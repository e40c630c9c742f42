"""Conversions and wording shared by the store backends.

Pure except `fsync_dir`. The `*_from_json` functions raise `ValueError` on
malformed input; callers turn that into `StoreCorrupt` naming their file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chatbridge.core.models import (
    Attachment,
    AttachmentKind,
    ChatKind,
    Conversation,
    InboxEntry,
    IncomingMessage,
    MemoryEntry,
    Session,
    Turn,
)
from chatbridge.core.ports.store import StoreCorrupt, StoreError

ENTRY_FIELDS = ("timestamp", "user_message", "assistant_summary", "session_name", "workdir")
# Tombstones of `forget` only have to outlive replies in flight at the time.
TOMBSTONE_KEEP = 7 * 24 * 3600.0


def corrupt(path: Path, kind: str, reason: str) -> StoreCorrupt:
    """The one-sentence error for an existing file we refuse to touch."""
    return StoreCorrupt(
        f"{path} is not a readable chatbridge {kind} store ({reason}); "
        "it was left untouched — move it aside or restore a backup"
    )


def unreadable(path: Path, err: OSError) -> StoreError:
    """Permission and I/O problems are not corruption: the file may be fine."""
    reason = err.strerror or type(err).__name__
    return StoreError(f"{path} cannot be opened ({reason.lower()}); check its owner, mode and disk")


def turns_to_json(turns: list[Turn]) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.content} for t in turns]


def turns_from_json(raw: Any) -> list[Turn]:
    if not isinstance(raw, list):
        raise ValueError("turns is not a list")
    turns = []
    for t in raw:
        if not isinstance(t, dict) or not _all_str(t, ("role", "content")):
            raise ValueError("a turn lacks role/content")
        turns.append(Turn(t["role"], t["content"]))
    return turns


def session_to_json(session: Session) -> dict[str, Any]:
    return {
        "user": session.user,
        "started_at": session.started_at,
        "last_active": session.last_active,
        "turns": turns_to_json(session.turns),
    }


def session_from_json(key: str, raw: Any) -> Session:
    if not isinstance(raw, dict) or not isinstance(raw.get("user"), str):
        raise ValueError(f"session {key!r} is malformed")
    if not is_num(raw.get("started_at")) or not is_num(raw.get("last_active")):
        raise ValueError(f"session {key!r} has no timestamps")
    turns = turns_from_json(raw.get("turns"))
    return Session(key, raw["user"], float(raw["started_at"]), float(raw["last_active"]), turns)


def copy_session(session: Session, key: str) -> Session:
    """A copy sharing nothing mutable, so callers cannot alter stored state by accident."""
    return Session(key, session.user, session.started_at, session.last_active, list(session.turns))


def entry_to_json(entry: MemoryEntry) -> dict[str, Any]:
    """Field order is the seed's order followed by `user` and `scope`."""
    return asdict(entry)


def entry_from_json(raw: Any) -> MemoryEntry:
    """Parse one ring-file entry; old seed entries (no user/scope) are migrated.

    Migration: the seed stored no owner, only `session_name` such as
    `telegram_579304651`; its first underscore becomes a colon
    (`telegram:579304651`) and the scope is "private" (the seed only ran in
    private chats). A name that does not fit is filed under user "", which
    `ring()` never returns, so an entry of unknown audience is never shown.
    """
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    if not is_num(raw.get("timestamp")) or not _all_str(raw, ENTRY_FIELDS[1:4]):
        raise ValueError("missing timestamp, user_message, assistant_summary or session_name")
    extra = {k: raw.get(k, "") for k in ("workdir", "user", "scope")}
    if not all(isinstance(v, str) for v in extra.values()):
        raise ValueError("workdir, user and scope must be strings")
    if "user" not in raw:
        extra["user"] = legacy_user(raw["session_name"])
    extra["scope"] = extra["scope"] or "private"
    return MemoryEntry(float(raw["timestamp"]), *(raw[k] for k in ENTRY_FIELDS[1:4]), **extra)


def legacy_user(session_name: str) -> str:
    platform, sep, ident = session_name.partition("_")
    ok = sep and platform.isalnum() and platform.islower() and ident and not ident.isspace()
    return f"{platform}:{ident}" if ok else ""


# An inbox message as stored: the conversation's fields, flat, then the message's.
# Rows written before issue 17 also hold a `user_name`; it is ignored on read.
MESSAGE_FIELDS = (
    "platform", "chat", "user", "thread", "kind", "text", "event_id", "reply_address",
)  # fmt: skip


def message_to_json(m: IncomingMessage) -> dict[str, Any]:
    """TypeError (before anything is written) if a field is not a string.

    The place (scope IDs, which hold no spaces) is one space-separated
    string; `addressed` is stored only when False ("0"). Rows without them
    (written before scopes) read as no place and addressed. Attachments are
    stored as their platform references (`attachments`, only when there are
    any), never as bytes."""
    c = m.conversation
    kind = c.kind.value if type(c.kind) is ChatKind else ChatKind(c.kind).value
    values = [c.platform, c.chat, c.user, c.thread, kind]
    values += [m.text, m.event_id, m.reply_address]
    for name, value in zip(MESSAGE_FIELDS, values, strict=True):
        if not isinstance(value, str):
            raise TypeError(f"inbox message field {name} must be a str, not {type(value).__name__}")
    stored: dict[str, Any] = dict(zip(MESSAGE_FIELDS, values, strict=True))
    if m.order:
        if not isinstance(m.order, int):
            raise TypeError(
                f"inbox message field order must be an int, not {type(m.order).__name__}"
            )
        stored["order"] = str(m.order)  # a string like the rest; absent for 0
    if m.place:
        if not all(isinstance(p, str) and p and not p.split()[1:] for p in m.place):
            raise TypeError("inbox message place must be scope IDs without spaces")
        stored["place"] = " ".join(m.place)
    if not m.addressed:
        stored["addressed"] = "0"
    if m.attachments:
        stored["attachments"] = [attachment_to_json(a) for a in m.attachments]
    return stored


ATTACHMENT_FIELDS = ("kind", "mime", "name", "ref")


def attachment_to_json(a: Attachment) -> dict[str, Any]:
    values = (AttachmentKind(a.kind).value, a.mime, a.name, a.ref)
    if not all(isinstance(v, str) for v in values) or not isinstance(a.size, int):
        raise TypeError("an attachment needs string kind, mime, name, ref and an int size")
    raw: dict[str, Any] = dict(zip(ATTACHMENT_FIELDS, values, strict=True))
    raw["size"] = a.size
    if a.transcript_shown:
        raw["transcript_shown"] = True
    return raw


def attachments_from_json(raw: Any) -> tuple[Attachment, ...]:
    """ValueError naming no reference (a file URL is the user's)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError("the message's attachments are not a list")
    out = []
    for item in raw:
        if not isinstance(item, dict) or not _all_str(item, ATTACHMENT_FIELDS):
            raise ValueError("an attachment lacks kind, mime, name or ref")
        if not isinstance(item.get("size"), int) or isinstance(item.get("size"), bool):
            raise ValueError("an attachment has no size")
        try:
            kind = AttachmentKind(item["kind"])
        except ValueError:
            raise ValueError("an attachment has an unknown kind") from None
        shown = item.get("transcript_shown") is True
        out.append(Attachment(kind, item["mime"], item["size"], item["name"], item["ref"], shown))
    return tuple(out)


def sent_to_json(sent: tuple[str, ...]) -> list[str]:
    """The refs as a list; TypeError if one is not a string (an outbox's handle
    object must be turned into its platform's message ID first)."""
    refs = list(sent)
    for ref in refs:
        if not isinstance(ref, str):
            raise TypeError(f"inbox sent refs must be str, not {type(ref).__name__}")
    return refs


def message_from_json(raw: Any) -> IncomingMessage:
    """Errors name the field, never its value (the text is the user's)."""
    if not isinstance(raw, dict) or not _all_str(raw, MESSAGE_FIELDS):
        raise ValueError(f"the message needs the string fields {', '.join(MESSAGE_FIELDS)}")
    try:
        kind = ChatKind(raw["kind"])
    except ValueError:
        raise ValueError("the message has an unknown chat kind") from None
    place, addressed = raw.get("place", ""), raw.get("addressed", "1")
    if not isinstance(place, str) or not isinstance(addressed, str):
        raise ValueError("the message's place and addressed must be strings")
    c = Conversation(raw["platform"], raw["chat"], raw["user"], raw["thread"], kind)
    order = raw.get("order", "0")
    if not isinstance(order, str) or not order.isdigit():
        raise ValueError("the message's order is not a number")
    return IncomingMessage(
        c,
        raw["text"],
        event_id=raw["event_id"],
        reply_address=raw["reply_address"],
        attachments=attachments_from_json(raw.get("attachments")),
        order=int(order),
        place=tuple(place.split()),
        addressed=addressed != "0",
    )


def sent_from_json(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise ValueError("sent is not a list of strings")
    return tuple(raw)


def inbox_to_json(entry: InboxEntry) -> dict[str, Any]:
    return {
        "key": entry.key,
        "received_at": entry.received_at,
        "message": message_to_json(entry.message),
        "answer": answer_to_json(entry.answer),
        "sent": sent_to_json(entry.sent),
    }


def answer_to_json(answer: str | None) -> str | None:
    """The answer as is; TypeError unless it is a str or None."""
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"an inbox answer must be a str or None, not {type(answer).__name__}")
    return answer


def inbox_from_json(raw: Any) -> InboxEntry:
    """Parse `inbox_to_json`'s output; ValueError (naming no user text) otherwise."""
    if not isinstance(raw, dict) or not isinstance(raw.get("key"), str):
        raise ValueError("an inbox entry has no key")
    if not is_num(raw.get("received_at")):
        raise ValueError(f"inbox entry {raw['key']!r} has no received_at")
    answer = raw.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"inbox entry {raw['key']!r}: answer is not a string")
    try:
        message, sent = message_from_json(raw.get("message")), sent_from_json(raw.get("sent"))
    except ValueError as err:
        raise ValueError(f"inbox entry {raw['key']!r}: {err}") from None
    return InboxEntry(raw["key"], message, float(raw["received_at"]), answer, sent)


def pending_of(entries: Iterable[InboxEntry], user: str, until: float) -> list[str]:
    """Keys of the pending `entries` that `user` (`platform:id`) sent at or
    before `until`: what `forget` drops with the user's data (marked done, so
    their text goes and a redelivery is not answered either)."""
    return [
        e.key for e in entries if e.message.conversation.user_id == user and e.received_at <= until
    ]


@functools.lru_cache(maxsize=4096)  # asked by every commit
def user_hash(user: str) -> str:
    """How a tombstone names a forgotten user: SHA-256 hex, no readable ID is kept."""
    return hashlib.sha256(user.encode("utf-8")).hexdigest()


def forgotten_since(at: float | None, started_at: float) -> bool:
    """A forget at or after the session's start: its exchange must not be written."""
    return at is not None and at >= started_at


def fsync_dir(directory: Path) -> None:
    """Make a rename durable: the directory entry itself must reach the disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# What `surrogateescape` turns the bytes 0x80-0xFF of invalid UTF-8 into.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def undecodable(value: Any) -> bool:
    """True when a decoded value holds bytes that were not UTF-8.

    The Redis client and the JSON store decode with `surrogateescape`, so a
    damaged byte reads as a lone surrogate U+DC80..U+DCFF; nothing chatbridge
    writes holds one (`incoming.clean_text` removes them), so one marks a
    damaged row. (Other lone surrogates, from a JSON `\\ud800` escape in an
    old seed file, are text that `clean_text` repairs on display.)
    """
    if isinstance(value, str):
        return bool(_ESCAPED_BYTE.search(value))
    if isinstance(value, dict):
        return any(undecodable(k) or undecodable(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(undecodable(v) for v in value)
    return False


def is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _all_str(d: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return all(isinstance(d.get(k), str) for k in keys)
