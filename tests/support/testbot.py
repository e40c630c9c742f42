"""A `testbot` in the Errbot spirit: `assert "1Z999" in await bot.say("…")`.

It drives the real `Engine` with a real SQLite store; only our own Protocols
(provider, clock, outbox) are in-process fakes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.store import SqliteStore
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider

ALICE = "579304651"


class TestBot:
    __test__ = False  # not a test class for pytest

    def __init__(self, engine: Engine, clock: ManualClock, provider: ScriptedProvider) -> None:
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
        return self.provider.prompts[-1].messages[-1].content


async def make_testbot(
    tmp_path: Path,
    *,
    provider: ScriptedProvider | None = None,
    settings: EngineSettings | None = None,
    allow: tuple[str, ...] = (f"telegram:{ALICE}", "telegram:42", "telegram:-100", "telegram:-200"),
    identities: dict[str, list[str]] | None = None,
    max_entries: int = 20,
    clock: ManualClock | None = None,
) -> TestBot:
    store = SqliteStore(tmp_path / "bot.db", max_entries=max_entries)
    await store.open()
    clock = clock or ManualClock()
    provider = provider or ScriptedProvider(lambda prompt: [f"echo: {prompt.messages[-1].content}"])
    settings = settings or EngineSettings(language="de")
    engine = Engine(
        replace(settings),
        store=store,
        provider=provider,
        access=AccessPolicy(allow=allow, identities=identities or {}),
        clock=clock,
    )
    return TestBot(engine, clock, provider)
