"""The console platform behind `chatbridge chat`: one line in, the reply out.

Reads stdin line by line whether or not it is a terminal, so the bot can be
scripted (`printf 'hi\\n' | chatbridge chat`). Each reply is printed whole
once it is complete, followed by a blank line.

Bytes, not text: stdin is read as bytes and each line decoded with the
stream's encoding and `errors="replace"`, so input that is not valid in it
(a stray 0xff, half a UTF-8 sequence) becomes U+FFFD whatever Python's
stdin error handler is (an ASCII stdin, a C locale without UTF-8 mode, is
read as UTF-8) (`PYTHONIOENCODING=utf-8:strict` would otherwise
stop the reader on the first such line). Output that the terminal's
encoding cannot show is written with "?" in its place.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import threading
from collections.abc import Callable
from typing import TextIO

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import DirectHandler, PlatformLimits, SentMessage

__all__ = ["ConsoleOutbox", "ConsolePlatform", "console_conversation"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class ConsoleOutbox:
    limits = PlatformLimits(max_chars=1_000_000, edit_interval=None, edits_after_restart=False)

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._printed = 0
        self.reader_gone = False

    async def send(self, text: str) -> SentMessage:
        """Prints the text; once the reader has left (a closed pipe) it prints
        nothing more, and the platform stops reading input."""
        if not self.reader_gone:
            try:
                self._out.write(_showable(f"{text}\n\n", self._out))
                self._out.flush()
            except BrokenPipeError:
                self.reader_gone = True
        self._printed += 1
        return f"console:{self._printed}"

    async def edit(self, message: SentMessage, text: str) -> None:
        # Only reached for an answer cut by a restart: print the whole text again.
        await self.send(text)

    async def typing(self) -> None:
        return None


def console_conversation(user: str) -> Conversation:
    """`local` is the console's own user; `telegram:123` or `alice` act as them."""
    return Conversation(platform="console", chat="local", user=user, kind=ChatKind.PRIVATE)


class ConsolePlatform:
    """Feeds stdin lines to the engine one at a time until EOF (Ctrl-D)."""

    name = "console"

    def __init__(self, engine: DirectHandler, *, user: str, stdin: TextIO, stdout: TextIO) -> None:
        self._engine = engine
        self._conversation = console_conversation(user)
        self._stdin = stdin
        self._outbox = ConsoleOutbox(stdout)

    @property
    def reader_gone(self) -> bool:
        """stdout was closed by its reader (`chatbridge chat | head -1`)."""
        return self._outbox.reader_gone

    async def run(self) -> None:
        """Answer what this console conversation left unanswered (a killed
        `chatbridge chat`), then every line until EOF."""
        engine = self._engine
        engine.attach("console", lambda message: self._outbox)
        await engine.resume(only=lambda m: m.conversation == self._conversation)
        lines = self._read_lines_in_background()
        while not self.reader_gone and (line := await lines.get()) is not None:
            text = line.strip()
            if text:
                message = IncomingMessage(conversation=self._conversation, text=text)
                await self._engine.handle(message, self._outbox)

    def _read_lines_in_background(self) -> asyncio.Queue[str | None]:
        """stdin lines, then None at EOF.

        A daemon thread, not `asyncio.to_thread`: a thread blocked in
        `readline` must not keep Ctrl-C from ending the program, and the
        default executor is joined at shutdown.
        """
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | None] = asyncio.Queue()

        read = _line_reader(self._stdin)

        def pump() -> None:
            try:
                try:
                    while line := read():
                        loop.call_soon_threadsafe(lines.put_nowait, line)
                except (OSError, ValueError):
                    pass  # stdin closed or unreadable: that is its end, as at EOF
                loop.call_soon_threadsafe(lines.put_nowait, None)
            except RuntimeError:
                return  # the loop closed (Ctrl-C) while a line was arriving

        threading.Thread(target=pump, name="console-stdin", daemon=True).start()
        return lines


def _line_reader(stdin: TextIO) -> Callable[[], str]:
    """One line per call ("" at EOF), decoded with replacement characters.

    Reads the file descriptor under a real stdin with `os.read`, not its
    buffered reader: a daemon thread blocked inside `BufferedReader.readline`
    holds the buffer's lock, and Python aborts at exit (Ctrl-C) when it
    cannot take it. A stream without a descriptor (a test's StringIO) is
    text already and is read as it is.
    """
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return stdin.readline
    encoding = _input_encoding(stdin)
    pending = bytearray()

    def read() -> str:
        # A line ends at b"\n", which no multi-byte character of an ASCII-
        # compatible encoding contains: decoding line by line splits none.
        while (end := pending.find(b"\n")) < 0:
            chunk = os.read(fd, 65536)
            if not chunk:
                line = bytes(pending)
                pending.clear()
                return line.decode(encoding, "replace")
            pending.extend(chunk)
        line = bytes(pending[: end + 1])
        del pending[: end + 1]
        return line.decode(encoding, "replace")

    return read


def _encoding(stream: TextIO) -> str:
    name = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "utf-8"


def _input_encoding(stream: TextIO) -> str:
    """The stream's encoding, but UTF-8 for ASCII (a C locale without UTF-8
    mode): ASCII text reads the same, and piped UTF-8 text still does."""
    name = _encoding(stream)
    return "utf-8" if name == "ascii" else name


def _showable(text: str, out: TextIO) -> str:
    """`text` with what `out`'s encoding cannot write replaced by "?"."""
    name = _encoding(out)
    if name == "utf-8" and not _SURROGATE.search(text):
        return text  # UTF-8 writes every character but a lone surrogate
    return text.encode(name, "replace").decode(name)
