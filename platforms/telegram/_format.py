"""Markdown answer -> Telegram plain text + `MessageEntity` list.

Telegram formatting is sent as entities (offsets in UTF-16 code units) rather
than MarkdownV2: entities need no escaping, so a half-streamed answer with an
unclosed `**` can never make the whole message unparseable.
"""

from __future__ import annotations

from dataclasses import dataclass

import telegramify_markdown
from telegram import MessageEntity
from telegramify_markdown import RenderConfig, utf16_len


@dataclass(frozen=True, slots=True)
class Rendered:
    """What goes on the wire: `text` plus `entities` (empty for plain text)."""

    text: str
    entities: tuple[MessageEntity, ...] = ()

    @property
    def formatted(self) -> bool:
        return bool(self.entities)


class MarkdownRenderer:
    """Converts Markdown to Telegram text + entities within a length limit.

    Contract: `render(text)` never loses content. When the converted text would
    exceed `max_chars` (UTF-16 code units, as Telegram counts) or comes out
    empty, the raw text is returned as plain text instead; the caller
    guarantees the raw text itself fits.
    """

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        # An isolated config: the library's default is a process-wide mutable
        # global, and nothing else in the process should be able to restyle us.
        self._config = RenderConfig.isolated()

    def render(self, markdown: str) -> Rendered:
        try:
            text, entities = telegramify_markdown.convert(markdown, config=self._config)
        except Exception:
            # A converter bug must not cost the user the answer.
            return Rendered(markdown)
        if not text.strip() or utf16_len(text) > self._max_chars:
            return Rendered(markdown)
        return Rendered(text, tuple(MessageEntity.de_json(e.to_dict()) for e in entities))

    @staticmethod
    def plain(markdown: str) -> Rendered:
        """The raw text with no entities: the fallback when Telegram rejects formatting."""
        return Rendered(markdown)
