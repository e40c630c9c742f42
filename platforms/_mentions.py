"""The text of a message without the bot's mentions: one function for every adapter.

Each adapter finds where its platform marks the bot's mentions (Telegram's
`mention` entities, Discord's `<@id>`, Slack's `<@U…>`) and hands the spans
here, so "@bot, what is X?" reaches the engine as "what is X?" on every
platform alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["mention_spans", "strip_mentions"]

# What usually follows an address, as in "@bot, do X" or "@bot: do X".
_AFTER_MENTION = re.compile(r"[,:]?[ \t]*")


def mention_spans(text: str, mention: re.Pattern[str]) -> list[tuple[int, int]]:
    """Where `mention` matches in `text`, as `(start, end)` indices."""
    return [match.span() for match in mention.finditer(text)]


def strip_mentions(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` without the mentions at `spans` (`(start, end)` indices into `text`).

    The comma or colon and the blanks after a mention go with it; the text
    on either side of a mention is joined by one space; the result is
    stripped. Everything else (other mentions, line breaks, indentation in
    code) stays as it was. Overlapping spans count once.
    """
    result, cursor, after_mention = "", 0, False
    for start, end in [*sorted(spans), (len(text), len(text))]:
        if start < cursor:
            continue
        piece = text[cursor:start]
        if after_mention:
            match = _AFTER_MENTION.match(piece)
            piece = piece[match.end() :] if match else piece
        if result and piece:
            result = result.rstrip(" \t") + " " + piece
        else:
            result += piece
        cursor, after_mention = max(end, start), True
    return result.strip()
