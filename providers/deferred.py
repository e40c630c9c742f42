"""A provider whose SDK is imported when it is first needed, not at start-up.

Importing `openai` takes ~0.7 s and `anthropic` longer; `chatbridge run`
should be polling its platforms by then. `warm()` imports the SDK in a worker
thread once the platforms are up, so the first answer rarely waits for it.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable

from chatbridge.providers.base import Prompt, Provider, StreamEvent

__all__ = ["DeferredProvider"]


class DeferredProvider:
    """Stands in for the provider `build()` makes, building it on first use."""

    def __init__(
        self,
        name: str,
        *,
        model: str,
        module: str,
        build: Callable[[], Provider],
        accepts: frozenset[str] = frozenset(),
    ):
        self.name = name
        self.accepts = accepts  # what the real one will take besides text
        self.label = name
        self.model = model
        self._module = module
        self._build = build
        self._real: Provider | None = None

    @property
    def built(self) -> Provider | None:
        """The real provider once it exists (tests, diagnostics)."""
        return self._real

    async def warm(self) -> None:
        """Import the SDK off the event loop, then build the provider."""
        await asyncio.to_thread(importlib.import_module, self._module)
        self._provider()

    def _provider(self) -> Provider:
        if self._real is None:
            self._real = self._build()
        return self._real

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        if self._real is None:
            # A first answer before `warm` finished waits for the import off
            # the event loop too: a loop blocked on the import lock for
            # seconds would let a replica's conversation lease expire.
            await self.warm()
        async for event in self._provider().stream(prompt):
            yield event

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()
