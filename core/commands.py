"""The commands every platform gets: /new /forget /memory /help /status."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.delivery import send_text
from core.memory import format_time, visible_entries
from core.models import IncomingMessage, MemoryEntry
from core.texts import human_duration
from platforms.base import Outbox

if TYPE_CHECKING:
    from core.engine import Engine

__all__ = ["Command", "CommandRunner", "parse_command"]

# "/new", "/new@my_bot", "/memory some args"; not "/path/to/file" or "/ 1".
_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@[A-Za-z0-9_]+)?(?:\s+(.*))?$", re.S)
ALIASES = {"start": "help"}  # Telegram clients send /start on first contact


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""


def parse_command(text: str) -> Command | None:
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    return Command(ALIASES.get(name, name), (match.group(2) or "").strip())


def _format_entry(entry: MemoryEntry, engine: Engine) -> str:
    when = format_time(entry.timestamp, engine.settings.timezone)
    return f"[{when}]\nUser: {entry.user_message}\nBot: {entry.assistant_summary}"


class CommandRunner:
    """Runs a parsed command for the engine; each reply is one short message."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def run(self, command: Command, message: IncomingMessage, outbox: Outbox) -> None:
        handler = {
            "new": self._new,
            "forget": self._forget,
            "memory": self._memory,
            "help": self._help,
            "status": self._status,
        }.get(command.name)
        if handler is None:
            text = self._engine.say("unknown", command=f"/{command.name}")
        else:
            text = await handler(message)
        await send_text(outbox, text)

    async def _new(self, message: IncomingMessage) -> str:
        key = message.conversation.key
        self._engine.cancel(key)
        async with self._engine.locks.hold(key):
            await self._engine.store.save_session(None, key=key)
        return self._engine.say("new")

    async def _forget(self, message: IncomingMessage) -> str:
        engine = self._engine
        key = message.conversation.key
        user = engine.access.ring_user(message.conversation)
        engine.cancel(key)
        async with engine.locks.hold(key):
            for ring_key in sorted(engine.access.ring_keys(user)):
                await engine.store.forget(ring_key)
        return engine.say("forget")

    async def _visible(self, message: IncomingMessage) -> list[MemoryEntry]:
        engine = self._engine
        user = engine.access.ring_user(message.conversation)
        since = engine.clock.now() - engine.settings.max_age
        return visible_entries(await engine.store.ring(user, since=since), message.conversation)

    async def _memory(self, message: IncomingMessage) -> str:
        engine = self._engine
        max_age = human_duration(engine.settings.max_age)
        entries = await self._visible(message)
        if not entries:
            return engine.say("memory_empty", max_age=max_age)
        body = "\n\n".join(_format_entry(entry, engine) for entry in entries)
        return f"{engine.say('memory_head', max_age=max_age)}\n\n{body}"

    async def _help(self, message: IncomingMessage) -> str:
        return self._engine.say("help")

    async def _status(self, message: IncomingMessage) -> str:
        engine = self._engine
        now = engine.clock.now()
        conversation = message.conversation
        session = await engine.store.load_session(conversation.key)
        ttl = engine.settings.session_ttl
        if session is None or session.expired(now, ttl):
            session_text = engine.say("session_none")
        else:
            session_text = engine.say(
                "session_live",
                age=human_duration(now - session.started_at),
                left=human_duration(ttl - session.idle_for(now)),
            )
        user = engine.access.ring_user(conversation)
        usage = await engine.store.usage(user, day=engine.today(now))
        return engine.say(
            "status",
            model=describe_model(engine),
            session=session_text,
            ring=len(await self._visible(message)),
            max_age=human_duration(engine.settings.max_age),
            tokens_in=usage.input_tokens,
            tokens_out=usage.output_tokens,
        )


def describe_model(engine: Engine) -> str:
    provider = engine.provider
    return f"{provider.model} ({provider.name})"
