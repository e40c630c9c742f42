"""How core gets a file's bytes and a voice note's words: two small ports.

A platform's outbox may also be a `FileSource` (it knows the platform's auth);
a `Transcriber` turns audio into text (OpenAI's transcription API).

Error tree::

    MediaError              one file could not be used; the rest of the message is answered
    ├── FileTooLarge        the platform's size, or the bytes received, passed the limit
    └── FetchFailed         the platform refused or broke the download, or sent something else
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from chatbridge.core.models import Attachment

__all__ = [
    "ByteSink",
    "FetchFailed",
    "FileSource",
    "FileTooLarge",
    "MediaError",
    "Transcriber",
]


class MediaError(Exception):
    """Root of media failures; `str()` is one line for the log, no secrets, no URL."""


class FileTooLarge(MediaError):
    pass


class FetchFailed(MediaError):
    pass


class ByteSink(Protocol):
    """Where a download's bytes go as they arrive, when core wants them
    transformed on the way (an image is base64-encoded while it downloads,
    so the encoding overlaps the transfer and the raw file is never held
    whole)."""

    def expect(self, size: int) -> None:
        """The size the server announced (a hint for sizing; it may lie)."""
        ...

    def write(self, chunk: bytes) -> None:
        """The next chunk of the body, in order."""
        ...


@runtime_checkable
class FileSource(Protocol):
    """What an outbox offers when its platform can hand over attachments."""

    async def fetch_file(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        """The attachment's bytes, at most `limit` of them; with `sink`, each
        chunk goes to `sink.write` as it arrives instead, and the result is empty.

        Raises `FileTooLarge` before any byte is read when the platform reports
        a larger size, and as soon as more than `limit` bytes arrive (sizes
        can lie); `FetchFailed` for anything else. Never raises anything else.
        """
        ...


class Transcriber(Protocol):
    """Speech to text (OpenAI `audio.transcriptions`)."""

    async def transcribe(self, audio: bytes | bytearray, *, name: str, mime: str) -> str:
        """The words spoken; raises `ProviderError` (a provider failure) or
        `MediaError` (the audio was refused)."""
        ...
