"""Markdown answer -> Telegram plain text + `MessageEntity` list.

Telegram formatting is sent as entities (offsets in UTF-16 code units) rather
than MarkdownV2: entities need no escaping, so a half-streamed answer with an
unclosed `**` can never make the whole message unparseable.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from telegram import MessageEntity


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


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
        # The converter (and its Markdown parser) is imported at the first
        # answer, not before the first poll.
        self._library: ModuleType | None = None
        self._config: Any = None

    def _converter(self) -> ModuleType:
        if self._library is None:
            self._library = importlib.import_module("telegramify_markdown")
            # An isolated config: the library's default is a process-wide mutable
            # global, and nothing else in the process should be able to restyle us.
            self._config = self._library.RenderConfig.isolated()
        return self._library

    def render(self, markdown: str) -> Rendered:
        try:
            library = self._converter()
            text, entities = library.convert(markdown, config=self._config)
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
