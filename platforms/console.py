"""The console platform behind `chatbridge chat`: one line in, the reply out.

Reads stdin line by line whether or not it is a terminal, so the bot can be
scripted (`printf 'hi\\n' | chatbridge chat`). Each reply is printed whole
once it is complete, followed by a blank line.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TextIO

from chatbridge.core.engine import Engine
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import PlatformLimits, SentMessage

__all__ = ["ConsoleOutbox", "ConsolePlatform", "console_conversation"]


class ConsoleOutbox:
    limits = PlatformLimits(max_chars=1_000_000, edit_interval=None)

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._printed = 0
        self.reader_gone = False

    async def send(self, text: str) -> SentMessage:
        """Prints the text; once the reader has left (a closed pipe) it prints
        nothing more, and the platform stops reading input."""
        if not self.reader_gone:
            try:
                self._out.write(f"{text}\n\n")
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

    def __init__(self, engine: Engine, *, user: str, stdin: TextIO, stdout: TextIO) -> None:
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

        def pump() -> None:
            try:
                for line in iter(self._stdin.readline, ""):
                    loop.call_soon_threadsafe(lines.put_nowait, line)
                loop.call_soon_threadsafe(lines.put_nowait, None)
            except RuntimeError:
                return  # the loop closed (Ctrl-C) while a line was arriving

        threading.Thread(target=pump, name="console-stdin", daemon=True).start()
        return lines
