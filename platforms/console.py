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
import threading
from collections.abc import Callable
from typing import TextIO

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import DirectHandler, PlatformLimits, SentMessage

__all__ = ["ConsoleOutbox", "ConsolePlatform", "console_conversation"]


class ConsoleOutbox:
    limits = PlatformLimits(max_chars=1_000_000, edit_interval=None, edits_after_restart=False)

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._encoding = _encoding(out)  # looked up once, not per answer
        self._printed = 0
        self.reader_gone = False

    async def send(self, text: str) -> SentMessage:
        """Prints the text; once the reader has left (a closed pipe) it prints
        nothing more, and the platform stops reading input."""
        if not self.reader_gone:
            try:
                self._out.write(_showable(f"{text}\n\n", self._encoding))
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
        batches = self._read_lines_in_background()
        conversation, outbox = self._conversation, self._outbox
        while not self.reader_gone and (batch := await batches.get()) is not None:
            messages = [
                IncomingMessage(conversation=conversation, text=text)
                for line in batch
                if (text := line.strip())
            ]
            if messages:
                # The lines of one read go to the inbox in one write, each
                # answered in turn; once the reader left, the rest are dropped.
                await self._engine.handle_all(messages, outbox, going=self._reader_here)

    def _reader_here(self) -> bool:
        return not self._outbox.reader_gone

    def _read_lines_in_background(self) -> asyncio.Queue[list[str] | None]:
        """stdin lines, in batches of those that arrived together, then None at EOF.

        A daemon thread, not `asyncio.to_thread`: a thread blocked in
        `readline` must not keep Ctrl-C from ending the program, and the
        default executor is joined at shutdown. Piped input hands over every
        complete line of a read at once: one wake-up of the loop per read,
        not per line.
        """
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[list[str] | None] = asyncio.Queue()

        read = _line_reader(self._stdin)

        def pump() -> None:
            try:
                try:
                    while batch := read():
                        loop.call_soon_threadsafe(lines.put_nowait, batch)
                except (OSError, ValueError):
                    pass  # stdin closed or unreadable: that is its end, as at EOF
                loop.call_soon_threadsafe(lines.put_nowait, None)
            except RuntimeError:
                return  # the loop closed (Ctrl-C) while a line was arriving

        threading.Thread(target=pump, name="console-stdin", daemon=True).start()
        return lines


def _line_reader(stdin: TextIO) -> Callable[[], list[str]]:
    """The complete lines one read brought, at least one per call ([] at
    EOF; a last line without its newline comes alone), each decoded with
    replacement characters.

    Reads the file descriptor under a real stdin with `os.read`, not its
    buffered reader: a daemon thread blocked inside `BufferedReader.readline`
    holds the buffer's lock, and Python aborts at exit (Ctrl-C) when it
    cannot take it. A stream without a descriptor (a test's StringIO) is
    text already and is read as it is.
    """
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return lambda: [line] if (line := stdin.readline()) else []
    encoding = _input_encoding(stdin)
    pending = bytearray()

    def read() -> list[str]:
        # A line ends at b"\n", which no multi-byte character of an ASCII-
        # compatible encoding contains: decoding line by line splits none.
        while (end := pending.rfind(b"\n")) < 0:
            chunk = os.read(fd, 65536)
            if not chunk:
                rest = bytes(pending)
                pending.clear()
                return [rest.decode(encoding, "replace")] if rest else []
            pending.extend(chunk)
        complete = bytes(pending[: end + 1])
        del pending[: end + 1]
        return [line.decode(encoding, "replace") for line in complete[:-1].split(b"\n")]

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


def _showable(text: str, encoding: str) -> str:
    """`text` with what `encoding` cannot write replaced by "?"."""
    try:
        text.encode(encoding)  # in C, cheaper than looking for what fails
    except UnicodeEncodeError:
        return text.encode(encoding, "replace").decode(encoding)
    return text
