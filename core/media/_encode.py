"""Base64 while the bytes arrive: an image's encoding overlaps its download.

Encoding a 10 MB image after it arrived adds its whole encoding time to the
answer and holds the raw file and its encoding at once. `Base64Sink` (a
`core.ports.ByteSink`) encodes each downloaded chunk as it comes, in runs of
whole 3-byte groups (carrying the 0 to 2 left-over bytes into the next chunk),
into one buffer sized from the announced length, so the raw file is never
held whole and the encoding is done when the last chunk is.
"""

from __future__ import annotations

import binascii

__all__ = ["Base64Sink", "encoded_size"]

HEAD = 16  # bytes kept for `sniff_image`


def encoded_size(size: int) -> int:
    """Length of the base64 (with padding) of `size` bytes."""
    return 4 * ((size + 2) // 3)


class Base64Sink:
    """Collects base64 of a download; `finish()` returns it (ASCII, no newlines)."""

    def __init__(self) -> None:
        self.head = b""  # the first bytes, to tell what the file really is
        self.size = 0  # raw bytes received
        self._out = bytearray()
        self._filled = 0
        self._carry = b""

    def expect(self, size: int) -> None:
        """Size the buffer once for `size` bytes (no regrowth copies); a
        wrong announcement only costs a grow or a trim at the end."""
        if self._filled == 0:
            self._out = bytearray(encoded_size(size))

    def write(self, chunk: bytes) -> None:
        if not chunk:
            return
        if len(self.head) < HEAD:
            self.head += chunk[: HEAD - len(self.head)]
        self.size += len(chunk)
        view = memoryview(chunk)
        if self._carry:  # complete the group the previous chunk left open
            need = 3 - len(self._carry)
            self._carry += bytes(view[:need])
            view = view[need:]
            if len(self._carry) < 3:
                return
            self._put(binascii.b2a_base64(self._carry, newline=False))
            self._carry = b""
        whole = len(view) - len(view) % 3
        if whole:
            self._put(binascii.b2a_base64(view[:whole], newline=False))
        self._carry = bytes(view[whole:])

    def finish(self) -> bytearray:
        """The encoding of everything written; the sink is empty afterwards."""
        if self._carry:
            self._put(binascii.b2a_base64(self._carry, newline=False))
            self._carry = b""
        out = self._out
        del out[self._filled :]
        self._out, self._filled = bytearray(), 0
        return out

    def _put(self, encoded: bytes) -> None:
        end = self._filled + len(encoded)
        if end <= len(self._out):
            self._out[self._filled : end] = encoded
        else:  # more than announced (or nothing announced): grow
            del self._out[self._filled :]
            self._out += encoded
        self._filled = end
