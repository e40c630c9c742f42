"""The console's stdin reader and its output check, on a real pipe.

Piped input hands the loop every complete line of a read at once (one
wake-up per read, not per line); a line is still only what ends at "\\n",
whatever else it holds, and a line longer than one read comes whole.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from chatbridge.platforms.console import _line_reader, _showable


@contextmanager
def piped(data: bytes) -> Iterator[TextIO]:
    """A UTF-8 text stream over a real pipe that a thread fills with `data`
    and closes (more than a pipe holds blocks the writer until it is read)."""
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with os.fdopen(write_fd, "wb") as sink:
            sink.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with os.fdopen(read_fd, "r", encoding="utf-8") as stream:
        yield stream
    writer.join()


def read_all(read: Callable[[], list[str]]) -> list[list[str]]:
    batches = []
    while batch := read():
        batches.append(batch)
    return batches


def test_one_read_gives_every_complete_line_and_the_rest_comes_alone_at_eof() -> None:
    data = b"eins\nzwei\r\ndrei\rvier\n\n\xff halb"
    with piped(data) as stream:
        batches = read_all(_line_reader(stream))
    # One write smaller than PIPE_BUF arrives whole: one read, one batch.
    # "\r" alone ends no line here (`clean_text` makes it a line break inside
    # the message); an empty line stays a line, which the console skips; the
    # rest without a newline is handed over alone, at EOF.
    assert batches == [["eins", "zwei\r", "drei\rvier", ""], ["\ufffd halb"]]


def test_a_line_longer_than_one_read_comes_whole() -> None:
    long_line = "a" * 150_000  # more than two reads of 64 KiB
    with piped(f"{long_line}\nkurz\n".encode()) as stream:
        lines = [line for batch in read_all(_line_reader(stream)) for line in batch]
    assert lines == [long_line, "kurz"]


def test_a_stream_without_a_descriptor_is_read_line_by_line() -> None:
    read = _line_reader(io.StringIO("eins\nzwei"))
    assert [read(), read(), read()] == [["eins\n"], ["zwei"], []]


def test_what_the_output_encoding_cannot_write_becomes_a_question_mark() -> None:
    assert _showable("Grüße …\n", "utf-8") == "Grüße …\n"
    assert _showable("a\ud800b", "utf-8") == "a?b"  # a lone surrogate
    assert _showable("Grüße …", "ascii") == "Gr??e ?"
    assert _showable("Grüße", "latin-1") == "Grüße"
