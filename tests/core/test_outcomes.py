"""One outcome path (issue 15): every entry is closed once, by its outcome.

An unexpected error (a bug in a provider or a delivery path, not one of our
error types) costs the message one sentence and closes its inbox entry as
failed, so a restart never answers it again. Real `SqliteStore` files; the
provider and outbox are our own Protocols' fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.metrics import OUTCOMES, Metrics
from chatbridge.core.models import Conversation, IncomingMessage
from chatbridge.core.outcome import Outcome
from chatbridge.core.texts import say
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider
from tests.support.testbot import ALICE


class BrokenOnce(RecordingOutbox):
    """A delivery path with a bug: its first send raises something unexpected."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def send(self, text: str) -> str:
        if self.broken:
            self.broken = False
            raise RuntimeError("a bug in the delivery path")
        return await super().send(text)


def _engine(store: SqliteStore, provider: ScriptedProvider, metrics: Metrics) -> Engine:
    return Engine(
        EngineSettings(language="en"),
        store=store,
        provider=provider,
        access=AccessPolicy(allow=(f"telegram:{ALICE}",)),
        clock=ManualClock(),
        metrics=metrics,
    )


async def _open(path: Path) -> SqliteStore:
    store = SqliteStore(path, max_entries=20)
    await store.open()
    return store


async def _until(condition: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"not within {within} s"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("broken", ["provider", "delivery"])
async def test_an_unexpected_error_is_told_once_and_never_answered_again(
    tmp_path: Path, broken: str, closing: Closing
) -> None:
    bug = RuntimeError("a bug in the provider")
    script = [bug] if broken == "provider" else ["fine"]
    outbox = BrokenOnce() if broken == "delivery" else RecordingOutbox()
    store, metrics = closing(await _open(tmp_path / "bot.db")), Metrics()
    engine = _engine(store, ScriptedProvider(lambda prompt: list(script)), metrics)
    engine.attach("telegram", lambda message: outbox)
    conversation = Conversation("telegram", ALICE, ALICE)
    assert await engine.accept(IncomingMessage(conversation, "Hallo", event_id="7"))

    async def closed() -> bool:
        return not await store.inbox_pending()

    await _until(closed)  # closed as failed, not left pending for the next start
    await engine.drain(1.0)
    assert outbox.texts == [say("en", "internal_error")]
    rendered = metrics.render().decode()
    labels = 'outcome="failed",platform="telegram",scope="default"'
    assert f"chatbridge_messages_total{{{labels}}} 1.0" in rendered
    await store.aclose()

    store = closing(await _open(tmp_path / "bot.db"))  # a restart with a provider that works
    provider = ScriptedProvider("fine")
    engine = _engine(store, provider, Metrics())
    engine.attach("telegram", lambda message: outbox)
    assert await engine.resume() == 0
    await engine.drain(1.0)
    assert provider.prompts == []
    assert outbox.texts == [say("en", "internal_error")], "told once, answered never again"


def test_metrics_count_the_outcomes_of_the_enum() -> None:
    assert set(OUTCOMES) == {o.value for o in Outcome}
    assert {o for o in Outcome if not o.closes} == {
        Outcome.ANSWERED,  # the commit closed it
        Outcome.LEFT,  # pending for the lease's next holder or the restart
        Outcome.DUPLICATE,  # never added, or another replica's
    }
