"""The commands every platform gets: /new /forget /memory /help /status /link /unlink.

Commands see a narrow `CommandContext` (store, access, clock, settings, the
provider's description and a `ConversationControl` for /new and /forget),
never the engine itself. Platform spellings (Telegram's `/start`, the
`/help@bot` suffix) are normalised by the adapters before text gets here.
"""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from chatbridge.core.access import AccessPolicy
from chatbridge.core.clock import Clock
from chatbridge.core.ledger import Account
from chatbridge.core.limits import LimitGate, pool_of
from chatbridge.core.link_commands import link, unlink
from chatbridge.core.links import People
from chatbridge.core.memory import format_time, visible_entries
from chatbridge.core.metrics import LastUsage
from chatbridge.core.models import ChatKind, IncomingMessage, MemoryEntry
from chatbridge.core.places import PlaceSettings
from chatbridge.core.ports.store import Store
from chatbridge.core.settings import EngineSettings
from chatbridge.core.texts import COMMANDS, count_entries, human_duration

__all__ = [
    "COMMANDS",
    "Command",
    "CommandContext",
    "ConversationControl",
    "parse_command",
    "run_command",
]

# "/new", "/memory some args"; not "/path/to/file" or "/ 1".
_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:\s+(.*))?$", re.S)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str = ""


def parse_command(text: str) -> Command | None:
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    return Command(match.group(1).lower(), (match.group(2) or "").strip())


class ConversationControl(Protocol):
    """What /new and /forget need from the engine: stop a reply, wait for the turn."""

    def cancel(self, key: str) -> None: ...

    def hold(self, key: str) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class CommandContext:
    store: Store
    access: AccessPolicy
    clock: Clock
    settings: EngineSettings
    model: str  # "gpt-5.4-mini (main)", for /status
    control: ConversationControl
    last_usage: LastUsage | None = None  # each conversation's last answer, for /status
    scope: str = ""  # the most specific configured scope in force here, "" for none
    limits: LimitGate | None = None  # what is left of the limits, for /status
    place: PlaceSettings | None = None  # the settings in force here (a scope's pool)


async def run_command(command: Command, message: IncomingMessage, ctx: CommandContext) -> str:
    """The reply to one command (one short message)."""
    handler = _HANDLERS.get(command.name)
    if handler is None:
        return ctx.settings.say("unknown", command=f"/{command.name}")
    return await handler(message, ctx)


async def _new(message: IncomingMessage, ctx: CommandContext) -> str:
    key = message.conversation.key
    ctx.control.cancel(key)
    async with ctx.control.hold(key):
        await ctx.store.save_session(None, key=key)
    return ctx.settings.say("new")


async def _forget(message: IncomingMessage, ctx: CommandContext) -> str:
    """Forgets the person: every ID linked with this one, and every key of its identity."""
    key = message.conversation.key
    person = await People(ctx.access, ctx.store).of(message.conversation)
    keys = {k for member in person.ring_keys for k in ctx.access.ring_keys(member)}
    ctx.control.cancel(key)
    async with ctx.control.hold(key):
        for ring_key in sorted(keys):
            await ctx.store.forget(ring_key)
    return ctx.settings.say("forget")


async def _visible(message: IncomingMessage, ctx: CommandContext) -> list[MemoryEntry]:
    people = People(ctx.access, ctx.store)
    person = await people.of(message.conversation)
    since = ctx.clock.now() - ctx.settings.max_age
    return visible_entries(await people.ring(person, since=since), message.conversation)


def _format_entry(entry: MemoryEntry, ctx: CommandContext) -> str:
    when = format_time(entry.timestamp, ctx.settings.timezone)
    return f"[{when}]\nUser: {entry.user_message}\nBot: {entry.assistant_summary}"


async def _memory(message: IncomingMessage, ctx: CommandContext) -> str:
    max_age = human_duration(ctx.settings.max_age)
    entries = await _visible(message, ctx)
    if not entries:
        return ctx.settings.say("memory_empty", max_age=max_age)
    body = "\n\n".join(_format_entry(entry, ctx) for entry in entries)
    return f"{ctx.settings.say('memory_head', max_age=max_age)}\n\n{body}"


async def _help(message: IncomingMessage, ctx: CommandContext) -> str:
    return ctx.settings.say("help")


async def _left(gate: LimitGate, accounts: tuple[Account, ...], language: str) -> str:
    """`\nleft today: N tokens` (the least over `accounts`), or "" without limits."""
    remainder = await gate.remainder(accounts)
    if remainder is None:
        return ""
    left = gate.status_lines(remainder, language=language)
    return f"\n{left}" if left else ""


async def _status(message: IncomingMessage, ctx: CommandContext) -> str:
    """Answered in the conversation's turn: an answer the user has already
    seen is committed (its limit hold settled) before /status reads."""
    async with ctx.control.hold(message.conversation.key):
        return await _status_now(message, ctx)


async def _status_now(message: IncomingMessage, ctx: CommandContext) -> str:
    settings = ctx.settings
    now = ctx.clock.now()
    conversation = message.conversation
    session = await ctx.store.load_session(conversation.key)
    ttl = settings.session_ttl
    if session is None or session.expired(now, ttl):
        session_text = settings.say("session_none")
    else:
        session_text = settings.say(
            "session_live",
            age=human_duration(now - session.started_at),
            left=human_duration(ttl - session.idle_for(now)),
        )
    # Token use is private: a group sees only what the group itself saw.
    cache = ""
    if conversation.kind is ChatKind.PRIVATE:
        user = ctx.access.ring_user(conversation)
        usage = await ctx.store.usage(user, day=settings.today(now))
        tokens_in, tokens_out = str(usage.input_tokens), str(usage.output_tokens)
        last = ctx.last_usage.get(conversation.key) if ctx.last_usage is not None else None
        if last is not None and last.input_tokens:
            cache = "\n" + settings.say(
                "status_cache", cached=last.cached_input_tokens, tokens_in=last.input_tokens
            )
        if ctx.limits is not None:
            person = await People(ctx.access, ctx.store).of(conversation)
            accounts = ctx.limits.accounts(
                person.key,
                conversation.user_id,
                admin=ctx.access.is_admin(conversation),
                place=ctx.place,
            )
            cache += await _left(ctx.limits, accounts, settings.language)
    else:
        tokens_in = tokens_out = "–"
        # A group sees what is left of its own shared pool, never a person's limits.
        if ctx.limits is not None and ctx.place is not None:
            pool = pool_of(ctx.place)
            cache += "" if pool is None else await _left(ctx.limits, (pool,), settings.language)
    return (
        settings.say(
            "status",
            model=ctx.model,
            scope=ctx.scope or "none",
            session=session_text,
            ring=count_entries(settings.language, len(await _visible(message, ctx))),
            max_age=human_duration(settings.max_age),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
        )
        + cache
    )


async def _link(message: IncomingMessage, ctx: CommandContext) -> str:
    command = parse_command(message.text)
    code = command.args if command is not None else ""
    return await link(
        message, code, store=ctx.store, access=ctx.access, clock=ctx.clock, settings=ctx.settings
    )


async def _unlink(message: IncomingMessage, ctx: CommandContext) -> str:
    return await unlink(message, store=ctx.store, access=ctx.access, settings=ctx.settings)


_HANDLERS = {
    "new": _new,
    "forget": _forget,
    "memory": _memory,
    "help": _help,
    "status": _status,
    "link": _link,
    "unlink": _unlink,
}
