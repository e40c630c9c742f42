"""A request body with its images' base64 put in place, sent without joining.

An SDK's JSON encoder would hold a 10 MB image's base64 several more times
(the data string, the encoder's chunk, the joined text, the bytes). `Splice`
stands in for each image or PDF with a tag while the request is built as
plain data, then writes the JSON once with the tags as pieces pointing at
the bytes the prompt already holds (one copy each), and `SplicedBody` sends
the pieces in order through the SDK's own client (its retries, errors and
stream parsing).
"""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from chatbridge.core.models import MediaPart

__all__ = ["Splice", "SplicedBody"]


class Splice:
    """Stands in for the base64 of a request's images and PDFs (as a `data:`
    URL for OpenAI, bare for Anthropic), then writes the request body with
    their bytes put in place (one copy each)."""

    def __init__(self) -> None:
        self._tag = f"chatbridge-media-{uuid.uuid4().hex}"
        self._parts: list[tuple[bytes, MediaPart]] = []

    def __bool__(self) -> bool:
        return bool(self._parts)

    def url(self, part: MediaPart) -> str:
        """A stand-in for `data:<mime>;base64,<data>`."""
        return self._put(f"data:{part.mime};base64,".encode(), part)

    def data(self, part: MediaPart) -> str:
        """A stand-in for the bare base64 data."""
        return self._put(b"", part)

    def body(self, request: dict[str, Any]) -> SplicedBody:
        text = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        pattern = re.compile(re.escape(self._tag.encode()) + rb"-(\d+)")
        pieces: list[bytes | bytearray] = []
        last = 0
        for match in pattern.finditer(text):
            prefix, part = self._parts[int(match.group(1))]
            pieces += [text[last : match.start()], prefix, part.data]
            last = match.end()
        pieces.append(text[last:])
        return SplicedBody(pieces)

    def _put(self, prefix: bytes, part: MediaPart) -> str:
        self._parts.append((prefix, part))
        return f"{self._tag}-{len(self._parts) - 1}"


class SplicedBody:
    """A request body sent piece by piece, never joined: the base64 of an image
    goes out of the bytes the prompt already holds. Its length is sent as
    Content-Length. Every `__aiter__` starts over, so the SDK may send it
    again on a retry; the SDK only retries a body it can rewind, so this one
    answers its `seekable`/`tell`/`seek` questions (`read` is never used: it
    has no `__iter__`, so httpx streams it asynchronously)."""

    CHUNK = 256 * 1024

    def __init__(self, pieces: list[bytes | bytearray]) -> None:
        self._pieces = pieces

    def __len__(self) -> int:
        return sum(len(p) for p in self._pieces)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    def read(self, size: int = -1) -> bytes:  # pragma: no cover - present for the SDK's check
        raise io.UnsupportedOperation("SplicedBody is streamed with async iteration")

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return 0

    def seek(self, position: int, whence: int = 0) -> int:
        return 0

    async def _chunks(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            view = memoryview(piece)
            for start in range(0, len(view), self.CHUNK):
                yield bytes(view[start : start + self.CHUNK])
