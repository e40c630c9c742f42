"""`StreamingReply` with a `LivePreview` (core/delivery.py), against in-process fakes of
our own Protocols: what goes to the preview, what to messages, pacing, refusals."""

from __future__ import annotations

import asyncio
import itertools
import time

from chatbridge.core.delivery import StreamingReply
from chatbridge.core.ports import DeliveryError, DeliveryRetry
from tests.support.fakes import RecordingOutbox


class FakePreview:
    """A preview that records its calls; `refuse`/`floods` script refusals. An
    appending one lives in a message of `chat`, as a native stream does."""

    def __init__(
        self,
        *,
        appends: bool,
        chat: RecordingOutbox | None = None,
        fail_after_start: bool = False,
    ) -> None:
        self.appends = appends
        self.shown: list[tuple[str, float]] = []  # (text, monotonic time)
        self.ended: list[str] = []
        self.refuse = False
        self.floods: list[float] = []
        self._chat = chat
        self._fail_after_start = fail_after_start
        self._message: str | None = None
        self._text = ""

    @property
    def message(self) -> str | None:
        return self._message

    def _display(self, text: str) -> None:
        assert self._chat is not None
        assert self._message is not None
        self._chat.messages[int(self._message) - 1].text = text
        self._text = text

    async def show(self, text: str) -> None:
        if self.floods:
            raise DeliveryRetry(self.floods.pop(0))
        if self.refuse:
            raise DeliveryError("preview refused")
        if self.appends:
            assert text.startswith(self._text), "an appending preview only grows"
            assert self._chat is not None
            if self._message is None:
                self._message = self._chat.seed(text[:4])
                if self._fail_after_start:  # the message exists, then the call fails
                    raise DeliveryError("append refused")
            self._display(text)
        self.shown.append((text, time.monotonic()))

    async def end(self, text: str) -> bool:
        self.ended.append(text)
        if not self.appends or not text.startswith(self._text):
            return False
        self._display(text)
        return True


class PreviewOutbox(RecordingOutbox):
    """A `RecordingOutbox` that offers a preview (asked once per reply, as outboxes are)."""

    def __init__(self, preview: FakePreview | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.preview = preview
        self.asked = 0

    def live_preview(self) -> FakePreview | None:
        self.asked += 1
        return self.preview


async def _stream(reply: StreamingReply, words: int, pause: float = 0.01) -> None:
    for i in range(words):
        await reply.push(f"w{i:02d} ")
        await asyncio.sleep(pause)


async def test_a_replacing_preview_takes_the_progress_and_the_final_text_is_sent() -> None:
    preview = FakePreview(appends=False)
    outbox = PreviewOutbox(preview, max_chars=40, edit_interval=0.02)
    reply = StreamingReply(outbox)
    await _stream(reply, 30)
    assert outbox.calls == [], "no message while the preview shows the answer"
    assert reply.started, "a visible preview counts as started"
    await reply.finish()
    assert len(preview.shown) >= 2
    assert all(len(text) <= 40 for text, _ in preview.shown), "a preview shows one message"
    assert [kind for kind, _, _ in outbox.calls] == ["send"] * len(outbox.messages)
    assert len(outbox.messages) >= 3
    assert " ".join(outbox.texts).split() == [f"w{i:02d}" for i in range(30)]
    # Past the limit the preview shows the part being written, not the start.
    assert not preview.shown[-1][0].startswith("w00")


async def test_preview_calls_are_paced_by_the_edit_interval() -> None:
    interval = 0.05
    preview = FakePreview(appends=False)
    reply = StreamingReply(PreviewOutbox(preview, edit_interval=interval))
    started = time.monotonic()
    await _stream(reply, 20)  # 0.2 s of deltas
    await reply.finish()
    times = [at for _, at in preview.shown]
    assert len(times) >= 2
    assert times[0] - started >= interval - 0.002, "the first preview waits an interval"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= interval - 0.002, gaps


async def test_a_refused_preview_is_dropped_and_the_reply_goes_on_with_edits() -> None:
    preview = FakePreview(appends=False)
    preview.refuse = True
    outbox = PreviewOutbox(preview, edit_interval=0.02)
    reply = StreamingReply(outbox)
    await _stream(reply, 20)
    await reply.finish()
    kinds = [kind for kind, _, _ in outbox.calls]
    assert kinds[0] == "send"
    assert "edit" in kinds, "the rest streamed by edits"
    assert outbox.texts == [" ".join(f"w{i:02d}" for i in range(20))]
    assert preview.shown == []


async def test_flood_control_on_the_preview_holds_it_and_loses_nothing() -> None:
    preview = FakePreview(appends=False)
    preview.floods = [0.1]
    outbox = PreviewOutbox(preview, edit_interval=0.01)
    reply = StreamingReply(outbox)
    started = time.monotonic()
    await _stream(reply, 20)
    await reply.finish()
    assert preview.floods == [], "flood control was never hit"
    assert preview.shown, "the preview was used again after the wait"
    assert preview.shown[0][1] - started >= 0.1, "no preview call inside the flood window"
    assert outbox.texts == [" ".join(f"w{i:02d}" for i in range(20))]
    assert [kind for kind, _, _ in outbox.calls] == ["send"]


async def test_an_appending_preview_is_recorded_at_once_and_ended_with_the_final_text() -> None:
    outbox = PreviewOutbox(edit_interval=0.02)
    outbox.preview = preview = FakePreview(appends=True, chat=outbox)
    recorded: list[tuple[str, ...]] = []

    async def on_posted(sent: tuple[str, ...]) -> None:
        recorded.append(sent)

    reply = StreamingReply(outbox, on_posted=on_posted)
    await _stream(reply, 10)
    assert recorded == [("1",)], "recorded as soon as the preview had a message"
    await reply.finish()
    whole = " ".join(f"w{i:02d}" for i in range(10))
    assert preview.ended == [whole]
    assert outbox.calls == [], "the stream carried the whole answer: no send, no edit"
    assert outbox.texts == [whole]


async def test_an_appending_preview_that_cannot_end_with_the_text_is_edited() -> None:
    outbox = PreviewOutbox(edit_interval=0.02)
    outbox.preview = preview = FakePreview(appends=True, chat=outbox)
    reply = StreamingReply(outbox)
    await _stream(reply, 5)
    final = "Something else entirely."  # does not extend what the stream shows
    await reply.finish(final)
    assert preview.ended == [final]
    assert outbox.calls == [("edit", "1", final)], "its message is edited, not reposted"
    assert outbox.texts == [final]


async def test_an_answer_outgrowing_the_stream_ends_it_and_goes_on_in_messages() -> None:
    outbox = PreviewOutbox(max_chars=40, edit_interval=0.02)
    outbox.preview = preview = FakePreview(appends=True, chat=outbox)
    reply = StreamingReply(outbox)
    await _stream(reply, 30)
    assert len(preview.ended) == 1, "ended once, when the answer outgrew one message"
    assert len(outbox.messages) >= 2, "the next message streams while the answer goes on"
    await reply.finish()
    assert len(preview.ended) == 1
    assert all(len(text) <= 40 for text, _ in preview.shown)
    assert outbox.calls[0][0] == "send", "the second message is posted"
    assert all(ref != "1" for kind, ref, _ in outbox.calls if kind == "send")
    assert " ".join(outbox.texts).split() == [f"w{i:02d}" for i in range(30)]


async def test_a_message_made_before_a_refusal_is_recorded_and_finished_by_edits() -> None:
    outbox = PreviewOutbox(edit_interval=0.02)
    outbox.preview = FakePreview(appends=True, chat=outbox, fail_after_start=True)
    recorded: list[tuple[str, ...]] = []

    async def on_posted(sent: tuple[str, ...]) -> None:
        recorded.append(sent)

    reply = StreamingReply(outbox, on_posted=on_posted)
    await _stream(reply, 10)
    await reply.finish()
    assert recorded == [("1",)], "the refused call's message was recorded"
    assert outbox.calls, "the rest came by edits"
    assert all(kind == "edit" and ref == "1" for kind, ref, _ in outbox.calls)
    assert outbox.texts == [" ".join(f"w{i:02d}" for i in range(10))]


async def test_a_seeded_or_quick_reply_never_asks_for_a_preview() -> None:
    preview = FakePreview(appends=False)
    seeded = PreviewOutbox(preview, edit_interval=0.01)
    ref = seeded.seed("before the restart")
    reply = StreamingReply(seeded, sent=(ref,))
    await _stream(reply, 5)
    await reply.finish()
    assert seeded.asked == 0
    assert seeded.calls[-1][0] == "edit"

    quick = PreviewOutbox(preview, edit_interval=5.0)
    reply = StreamingReply(quick)
    await reply.push("Gleich da.")
    await reply.finish()
    assert quick.asked == 0
    assert quick.calls == [("send", "1", "Gleich da.")]
