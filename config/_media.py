"""The `media:` section: photos, voice messages and files."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ._base import Section

__all__ = ["MediaConfig", "Size", "TranscriptionConfig", "parse_size"]

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMG]?B)?", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
_EXPECTED = "expected a size like 10MB, 512KB or a number of bytes"
MAX_FILE_BYTES = 1 << 30


def parse_size(value: Any) -> int:
    """`10MB` -> 10,485,760: 1024-based (`50KB` = 51,200 bytes); a bare number is bytes."""
    if isinstance(value, bool):
        raise ValueError(f"{_EXPECTED}, not a boolean")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        size = int(float(match.group(1)) * _UNITS[(match.group(2) or "").upper()])
    else:
        raise ValueError(_EXPECTED)
    if size < 1:
        raise ValueError(f"{_EXPECTED}; it must be at least 1 byte")
    if size > MAX_FILE_BYTES:
        raise ValueError("a size can be at most 1GB")
    return size


Size = Annotated[int, BeforeValidator(parse_size)]


class TranscriptionConfig(Section):
    """Which OpenAI-type provider entry transcribes voice messages, with which model."""

    provider: str
    """A `providers` entry of type `openai` (its key and base_url are used)."""
    model: str = Field(default="gpt-4o-mini-transcribe", min_length=1)
    """The transcription model (`gpt-4o-mini-transcribe`, `whisper-1`, ...)."""


class MediaConfig(Section):
    """Photos, voice messages and files sent to the bot."""

    images: bool = True
    """Photos and image files go to the model (vision); false: only the caption is answered."""
    voice: bool = True
    """Voice messages and audio files are transcribed, then answered as text."""
    transcription: TranscriptionConfig | None = None
    """Speech to text; unset: a voice message gets one sentence saying it cannot be heard."""
    max_file_bytes: Size = 10 << 20
    """Larger files get one sentence; nothing past this is downloaded (1024-based sizes)."""
