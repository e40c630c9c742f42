"""The `debug` provider: answers with the exact prompt it received.

Lets an admin see what the LLM would see (system prompt, live turns, the
injected `<conversation_history>` block) without any API key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from chatbridge.core.models import Turn, Usage
from chatbridge.providers.base import Prompt, StreamEvent, TextDelta, UsageReport

ASSISTANT_PREVIEW = 200


def _shown(turn: Turn) -> str:
    """Earlier answers are shortened: they are this provider's own echoes, and
    echoing them in full would double the answer with every turn."""
    if turn.role != "assistant" or len(turn.content) <= ASSISTANT_PREVIEW:
        return turn.content
    hidden = len(turn.content) - ASSISTANT_PREVIEW
    return f"{turn.content[:ASSISTANT_PREVIEW]}[… {hidden} more chars of an earlier answer]"


def render_prompt(prompt: Prompt) -> str:
    """The prompt as readable text: one `[role]` header per message.

    System prompt and user turns (with any `<conversation_history>` block)
    are shown exactly; earlier assistant turns are cut to a preview.
    """
    parts = [f"[system]\n{prompt.system}"]
    parts += [f"[{turn.role}]\n{_shown(turn)}" for turn in prompt.messages]
    return "\n\n".join(parts)


class DebugProvider:
    """Streams the rendered prompt back in a few deltas, as a real model would."""

    def __init__(self, name: str = "debug", *, chunk_chars: int = 400) -> None:
        self.name = name
        self.label = name
        self.model = "debug"
        self._chunk_chars = chunk_chars

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        text = render_prompt(prompt)
        for start in range(0, len(text), self._chunk_chars):
            yield TextDelta(text[start : start + self._chunk_chars])
        # Rough token counts (4 chars/token) so /status has something honest to sum.
        chars_in = sum(len(t.content) for t in prompt.messages) + len(prompt.system)
        yield UsageReport(Usage(input_tokens=chars_in // 4, output_tokens=len(text) // 4))

    async def aclose(self) -> None:
        return None
