"""How an answer reaches a chat: the `Outbox` one platform provides per reply.

Error tree::

    DeliveryError              the platform refused the call for good
    └── DeliveryRetry          flood control: nothing was sent, retry after `retry_after`

An outbox maps every failure of its SDK into this tree (unexpected SDK
exceptions included), so delivery code never sees an SDK exception.
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DeliveryError",
    "DeliveryRetry",
    "Found",
    "LivePreview",
    "Outbox",
    "Phase",
    "PlatformLimits",
    "PostedLookup",
    "PreviewSource",
    "SentMessage",
    "delivery_phase",
    "in_progress_phase",
]


class Phase(enum.Enum):
    """What an outbox call is for; a platform pacing its calls lets FINAL go first."""

    FINAL = "final"  # the answer's final text, commands, notices (the default)
    PROGRESS = "progress"  # streamed progress (edits, drafts) and typing indicators


_PHASE: contextvars.ContextVar[Phase] = contextvars.ContextVar("delivery_phase")


def delivery_phase() -> Phase:
    """The phase of outbox calls made from the current task."""
    return _PHASE.get(Phase.FINAL)


def in_progress_phase() -> None:
    """Mark the current task's outbox calls as progress. Call it first thing
    in a task of its own (a context variable: the caller's calls stay final)."""
    _PHASE.set(Phase.PROGRESS)


SentMessage = str
"""Reference to a message an outbox sent, e.g. ``"-100123:42"``.

A plain string so it can be stored with an inbox entry: an outbox built for
the same chat after a restart can still edit that message.
"""


@dataclass(frozen=True, slots=True)
class PlatformLimits:
    """What the shared delivery code must respect for one platform.

    `edit_interval` is the minimum gap between two edits of one streamed
    message; `None` means the platform cannot edit and gets the final text
    only. `measure` is how the platform counts `max_chars` (Telegram counts
    UTF-16 code units, so one emoji is two). `typing_interval` is how often
    the typing indicator must be renewed while nothing is shown yet (Telegram
    shows it ~5 s per call; `None`: the platform has none).
    `edits_after_restart` False says a message reference means nothing to
    the next process (the console: what it printed cannot be changed, its
    "edit" prints the text again), so the engine does not record references
    for finishing an answer after a restart: that prints it again either way.
    """

    max_chars: int
    edit_interval: float | None = 1.0
    measure: Callable[[str], int] = len
    typing_interval: float | None = None
    edits_after_restart: bool = True


class Outbox(Protocol):
    """Sends one reply into the chat an `IncomingMessage` came from.

    Methods return only once the platform accepted the call. They raise
    `DeliveryRetry` when the platform asks to wait and `DeliveryError` when a
    call was refused for good; nothing else.
    """

    limits: PlatformLimits

    async def send(self, text: str) -> SentMessage: ...

    async def edit(self, message: SentMessage, text: str) -> None:
        """Replace the text of a message this chat's outbox sent (also before a restart)."""
        ...

    async def typing(self) -> None:
        """Show 'typing…' where the platform has it; never raises."""
        ...


class LivePreview(Protocol):
    """A platform's own way to show one reply while it is generated, instead of
    posting a message and editing it. The shared delivery code paces the calls
    (`PlatformLimits.edit_interval`) and decides what to show; two kinds:

    - replacing (`appends` False; Telegram's message drafts): each `show(text)`
      replaces what the preview shows. The preview is not a message
      (`message` stays None), so the final text is still sent with
      `Outbox.send`, and a crash leaves nothing behind in the chat.
    - appending (`appends` True; Slack's native message streams): `show(text)`
      adds what `text` has beyond the text shown before (`text` always extends
      it). The preview lives in a message: `message` names it as soon as the
      platform did (also when a later part of that call failed), so it is
      recorded like a sent message, and after `end` it is an ordinary message
      that `Outbox.edit` can change.

    Calls raise `DeliveryRetry` when the platform asks to wait (the same call
    may be made again) and `DeliveryError` when it refused the preview: the
    reply then goes on with messages and edits, without this preview.
    """

    appends: bool

    @property
    def message(self) -> SentMessage | None:
        """The message the preview lives in, once there is one."""
        ...

    async def show(self, text: str) -> None: ...

    async def end(self, text: str) -> bool:
        """Finish the preview with `text`, which fits one message.

        Returns True when the preview's message now shows `text`, finished;
        False when there is nothing to finish (a replacing preview, or nothing
        shown yet) or the preview was closed as it stood (`text` does not extend
        it, or the platform refused): the caller then delivers `text` with
        `Outbox.send` / `Outbox.edit`.
        """
        ...


@runtime_checkable
class PreviewSource(Protocol):
    """An `Outbox` that may offer a `LivePreview`; outboxes without one are
    streamed with edits."""

    def live_preview(self) -> LivePreview | None:
        """A fresh preview for this reply, or None where this chat has none
        (a group, a plain DM, switched off, refused before)."""
        ...


@dataclass(frozen=True, slots=True)
class Found:
    """What a `PostedLookup` found: `message`, the bot's own message whose text
    begins the text about to be posted (adopt it); or `ahead`, a message of the
    bot that the text about to be posted begins but does not reach yet (post
    nothing yet; look again once there is more text); or neither."""

    message: SentMessage | None = None
    ahead: bool = False


@runtime_checkable
class PostedLookup(Protocol):
    """An `Outbox` that can look back in its chat before posting: "look before
    posting again".

    A process killed between the platform taking a message and the store
    recording its reference leaves that message unknown to the restarted
    process, which would post the answer a second time. Where the platform
    lets a bot read its chat (Slack, Discord), the outbox finds such a
    message, and the delivery code adopts and edits it instead.
    """

    async def posted_before(self, text: str, *, after: SentMessage | None) -> Found:
        """Look for the bot's own message posted after the message being answered
        (and after `after`, the reply's last recorded message) that begins
        `text` (the message about to be posted), as the platform shows it.

        Only the found message's text beginning `text` adopts it: a short `text`
        beginning some other answer (`ahead`) must not take that answer over.
        Returns `Found()` at once where no earlier process can have answered (a
        message this process took in itself), when nothing matches, and when
        the lookup failed (logged; the reply then posts as usual). Never raises.
        """
        ...


class DeliveryError(Exception):
    """Root of delivery failures; the message is one line naming the call."""


class DeliveryRetry(DeliveryError):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"platform asks to retry after {retry_after:g}s")
        self.retry_after = retry_after
