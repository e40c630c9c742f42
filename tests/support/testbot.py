"""A `testbot` in the Errbot spirit: `assert "1Z999" in await bot.say("…")`.

It drives the real `Engine` with a real SQLite store; only our own Protocols
(provider, clock, outbox) are in-process fakes. Tests get bots from the
`testbot` fixture (tests/conftest.py, a `TestBots`), which closes every bot
it made after the test, however the test ended.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, cast

from typing_extensions import TypeVar

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import Provider
from chatbridge.stores.sqlite import SqliteStore
from tests.support import people
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider

ALICE = str(people.ALICE)  # as the engine sees a user: a string ID
DEFAULT_ALLOW = (f"telegram:{ALICE}", "telegram:42", "telegram:-100", "telegram:-200")

# The bot's provider type: a `ScriptedProvider` unless the test passes a real
# one (an OpenAI provider at a fake server, a fallback chain), so
# `bot.provider.prompts` type-checks where it exists.
P = TypeVar("P", bound=Provider, default=ScriptedProvider)


class TestBot(Generic[P]):
    __test__ = False  # not a test class for pytest

    def __init__(self, engine: Engine, clock: ManualClock, provider: P) -> None:
        self.engine = engine
        self.clock = clock
        self.provider = provider
        self.outboxes: list[RecordingOutbox] = []

    async def say(
        self,
        text: str,
        *,
        user: str = ALICE,
        chat: str | None = None,
        kind: ChatKind = ChatKind.PRIVATE,
        platform: str = "telegram",
        thread: str = "",
        event_id: str = "",
    ) -> str:
        """Send one message; returns everything the bot posted in reply."""
        conversation = Conversation(
            platform=platform, chat=chat or user, user=user, thread=thread, kind=kind
        )
        outbox = RecordingOutbox()
        self.outboxes.append(outbox)
        await self.engine.handle(
            IncomingMessage(conversation=conversation, text=text, event_id=event_id), outbox
        )
        return "\n".join(outbox.texts)

    @property
    def last_prompt_text(self) -> str:
        assert isinstance(self.provider, ScriptedProvider), "a scripted provider records prompts"
        return self.provider.prompts[-1].messages[-1].content

    @property
    def sqlite(self) -> SqliteStore:
        """The store, which `make_testbot` made SQLite (for tests that reach its connection)."""
        store = self.engine.store
        assert isinstance(store, SqliteStore)
        return store

    async def aclose(self) -> None:
        """Close the store (idempotent: a test may close early to restart)."""
        await self.engine.store.aclose()


async def make_testbot(
    tmp_path: Path,
    *,
    provider: P | None = None,
    settings: EngineSettings | None = None,
    allow: tuple[str, ...] = DEFAULT_ALLOW,
    identities: dict[str, list[str]] | None = None,
    max_entries: int = 20,
    clock: ManualClock | None = None,
) -> TestBot[P]:
    store = SqliteStore(tmp_path / "bot.db", max_entries=max_entries)
    await store.open()
    clock = clock or ManualClock()
    if provider is None:  # P is then its default, ScriptedProvider
        provider = cast(P, ScriptedProvider(lambda p: [f"echo: {p.messages[-1].content}"]))
    settings = settings or EngineSettings(language="de")
    engine = Engine(
        replace(settings),
        store=store,
        provider=provider,
        access=AccessPolicy(allow=allow, identities=identities or {}),
        clock=clock,
    )
    return TestBot(engine, clock, provider)


class TestBots:
    """The `testbot` fixture: `bot = await testbot(provider=…)` is `make_testbot`
    in the test's directory (another `directory` for a second bot), and every
    bot made is closed when the test ends, also after a failed assert.
    Two calls on one directory are one bot restarted: same store file."""

    __test__ = False

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._made: list[TestBot[Any]] = []

    async def __call__(
        self,
        directory: Path | None = None,
        *,
        provider: P | None = None,
        settings: EngineSettings | None = None,
        allow: tuple[str, ...] = DEFAULT_ALLOW,
        identities: dict[str, list[str]] | None = None,
        max_entries: int = 20,
        clock: ManualClock | None = None,
    ) -> TestBot[P]:
        bot = await make_testbot(
            directory or self._directory,
            provider=provider,
            settings=settings,
            allow=allow,
            identities=identities,
            max_entries=max_entries,
            clock=clock,
        )
        self._made.append(bot)
        return bot

    async def aclose(self) -> None:
        """Close every bot made, newest first; the first failure is raised after all."""
        failures: list[BaseException] = []
        for bot in reversed(self._made):
            try:
                await bot.aclose()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]
