"""Memory rings: what one exchange leaves behind, who may see it, and the
`<conversation_history>` block that bridges a new session to the last ones.

The format follows the seed exactly (a heading, then `[dd.mm. HH:MM]`,
`User:` and `Bot:` lines per entry), plus one line with the current time so
that "Soll Mittwoch kommen" can be resolved against today's date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from chatbridge.core.models import ChatKind, Conversation, MemoryEntry

__all__ = [
    "HistoryTexts",
    "build_bridge",
    "cut_summary",
    "cut_text",
    "format_time",
    "neutralise",
    "scope_of",
    "visible_entries",
]

ELLIPSIS = "…"
_TAG = re.compile(r"<\s*(/?)\s*conversation_history\s*>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class HistoryTexts:
    heading: str
    current_message: str
    current_time: str
    weekdays: tuple[str, ...]


HISTORY_TEXTS = {
    "de": HistoryTexts(
        heading="Letzte Gespräche mit dem User:",
        current_message="Aktuelle Nachricht:",
        current_time="Aktuelle Zeit:",
        weekdays=(
            "Montag",
            "Dienstag",
            "Mittwoch",
            "Donnerstag",
            "Freitag",
            "Samstag",
            "Sonntag",
        ),
    ),
    "en": HistoryTexts(
        heading="Recent conversations with the user:",
        current_message="Current message:",
        current_time="Current time:",
        weekdays=(
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ),
    ),
}


def neutralise(text: str) -> str:
    """Make `<conversation_history>` tags in untrusted text inert.

    A user who writes `</conversation_history>` must not be able to close the
    block early and forge what follows, so the angle brackets of any such tag
    (any case, any spacing) become look-alike guillemets.
    """
    return _TAG.sub(lambda m: f"‹{m.group(1)}conversation_history›", text)


def cut_text(text: str, limit: int) -> str:
    """At most `limit` chars; a cut lands on a word boundary and ends in "…"."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:  # a boundary that keeps most of the text
        head = head[:space]
    return head.rstrip() + ELLIPSIS


def cut_summary(answer: str, limit: int) -> str:
    """The seed's summary: whole leading lines while they fit, never empty.

    The seed stored "" when the first line alone was longer than the limit;
    here that line is cut at a word boundary instead.
    """
    kept: list[str] = []
    used = 0
    for line in answer.strip().splitlines():
        cost = len(line) + (1 if kept else 0)
        if used + cost > limit:
            break
        kept.append(line)
        used += cost
    summary = "\n".join(kept).strip()
    return summary or cut_text(answer, limit)


def scope_of(conversation: Conversation) -> str:
    """The audience an exchange happened in: "private", or the group's chat ID."""
    if conversation.kind is ChatKind.PRIVATE:
        return ChatKind.PRIVATE.value
    return conversation.chat_id


def visible_entries(
    entries: Iterable[MemoryEntry], conversation: Conversation
) -> list[MemoryEntry]:
    """Only entries the current audience has already seen.

    Private entries never reach a group; a group's entries only that group.
    (Entries are already one user's: rings are per user.)
    """
    scope = scope_of(conversation)
    return [entry for entry in entries if entry.scope == scope]


def format_time(timestamp: float, tz: tzinfo | None) -> str:
    """The seed's entry time, `05.04. 14:23`."""
    return datetime.fromtimestamp(timestamp, tz).strftime("%d.%m. %H:%M")


def _now_line(now: float, tz: tzinfo | None, texts: HistoryTexts) -> str:
    moment = datetime.fromtimestamp(now, tz)
    weekday = texts.weekdays[moment.weekday()]
    return f"{texts.current_time} {weekday}, {moment:%d.%m.%Y %H:%M}"


def build_bridge(
    entries: Sequence[MemoryEntry],
    message: str,
    *,
    now: float,
    language: str,
    tz: tzinfo | None,
) -> str:
    """The first user turn of a new session: history block, time, message.

    With no entries the message goes out unchanged, as in the seed.
    """
    if not entries:
        return message
    texts = HISTORY_TEXTS[language]
    lines = ["<conversation_history>", texts.heading]
    for entry in entries:
        lines += [
            f"\n[{format_time(entry.timestamp, tz)}]",
            f"User: {neutralise(entry.user_message)}",
            f"Bot: {neutralise(entry.assistant_summary)}",
        ]
    lines.append("</conversation_history>")
    block = "\n".join(lines)
    return f"{block}\n\n{_now_line(now, tz, texts)}\n{texts.current_message} {neutralise(message)}"
