"""Markdown (what models write) rendered as Slack mrkdwn.

The conversion is `markdown_to_mrkdwn`'s; this module adds what that library
leaves to the caller: Slack's three control characters (`&`, `<`, `>`) are
escaped first, so a model's `a < b` shows literally instead of being read as
a link or mention. A `>` starting a line stays, as Markdown's blockquote.
"""

from __future__ import annotations

import logging
import re

from markdown_to_mrkdwn import SlackMarkdownConverter

__all__ = ["MrkdwnRenderer", "escape"]

log = logging.getLogger(__name__)

_QUOTE = re.compile(r"^(\s*)&gt;", re.MULTILINE)


def escape(text: str) -> str:
    """`&`, `<`, `>` as Slack wants them in message text (blockquote markers kept)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _QUOTE.sub(r"\1>", escaped)


class MrkdwnRenderer:
    """Converts Markdown to mrkdwn; one per platform (the converter compiles its rules once)."""

    def __init__(self) -> None:
        self._converter = SlackMarkdownConverter()

    def render(self, markdown: str) -> str:
        """`markdown` as mrkdwn; code blocks keep their fences and content.

        Raises `ValueError` when the converter fails on this text, so the
        caller can send it plain instead (an answer is never lost to markup).
        """
        try:
            return str(self._converter.convert(escape(markdown)))
        except Exception as exc:  # third-party converter: any failure means "send it plain"
            raise ValueError(f"markdown conversion failed: {exc}") from exc
