"""`Base64Sink`: base64 written chunk by chunk equals base64 of the whole file."""

from __future__ import annotations

import base64
import itertools

from hypothesis import given
from hypothesis import strategies as st

from chatbridge.core.media._encode import Base64Sink, encoded_size


@given(
    data=st.binary(max_size=3000),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
    announced=st.sampled_from(["exact", "less", "more", "none"]),
)
def test_chunked_encoding_equals_the_whole(data: bytes, cuts: list[int], announced: str) -> None:
    sink = Base64Sink()
    size = {"exact": len(data), "less": len(data) // 2, "more": len(data) + 7}.get(announced)
    if size is not None:
        sink.expect(size)
    edges = [0, *sorted(c for c in cuts if c <= len(data)), len(data)]
    for start, end in itertools.pairwise(edges):
        sink.write(data[start:end])
    assert sink.head == data[:16]
    assert sink.size == len(data)
    encoded = sink.finish()
    assert encoded == base64.b64encode(data)
    assert len(encoded) == encoded_size(len(data))


def test_an_announced_size_allocates_once() -> None:
    sink = Base64Sink()
    sink.expect(30_000)
    buffer = sink._out
    assert len(buffer) == encoded_size(30_000), "sized from the announcement up front"
    for start in range(0, 30_000, 1_001):
        sink.write(b"\x07" * min(1_001, 30_000 - start))
    assert sink.finish() is buffer, "the buffer sized from the announcement is the result"
