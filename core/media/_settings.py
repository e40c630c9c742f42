"""The `media:` section as plain values."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MediaSettings", "parse_size"]

MB = 1024 * 1024
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMG]?B)?", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 1024, "MB": MB, "GB": 1024 * MB}


def parse_size(value: str | int) -> int:
    """`10MB` -> 10,485,760: sizes are 1024-based; a bare number is bytes.
    ValueError for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    match = _SIZE.fullmatch(str(value).strip())
    if match is None:
        raise ValueError(f"expected a size like 10MB, 512KB or a number of bytes, got {value!r}")
    number, unit = float(match.group(1)), (match.group(2) or "").upper()
    return int(number * _UNITS[unit])


@dataclass(frozen=True, slots=True)
class MediaSettings:
    images: bool = True
    """Images go to the model; False: the caption is answered, one sentence says images are off."""
    voice: bool = True
    """Voice notes and audio are transcribed, then answered as text."""
    transcription: bool = False
    """Whether a transcriber is configured (`media.transcription`)."""
    max_file_bytes: int = 10 * MB
    """Larger files get one sentence and are never downloaded past this."""
