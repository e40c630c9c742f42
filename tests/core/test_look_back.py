"""`StreamingReply` with a `PostedLookup` outbox (core/delivery.py): a message an
earlier process posted for this reply and never recorded is adopted and edited,
a message that only begins alike with a short text is not taken over, and the
lookup is asked before the first post only. In-process fakes of our Protocols."""

from __future__ import annotations

import asyncio

from chatbridge.core.delivery import StreamingReply
from chatbridge.core.ports import Found
from tests.support.fakes import RecordingOutbox

ANSWER = "answer to [m7] - the Chemitek parcel leaves on Wednesday."
OTHER = "answer to [m3] - the Chemitek parcel leaves on Wednesday."


class LookingOutbox(RecordingOutbox):
    """A `RecordingOutbox` whose chat holds `earlier` (posted before a restart,
    unrecorded); `posted_before` judges them as the Slack and Discord outboxes do:
    the text about to be posted must begin with a message's text."""

    def __init__(self, earlier: list[str], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.earlier = [self.seed(text) for text in earlier]
        self.looked: list[tuple[str, str | None]] = []
        self.first_look = asyncio.Event()

    async def posted_before(self, text: str, *, after: str | None) -> Found:
        self.looked.append((text, after))
        self.first_look.set()
        first = int(after) if after else 0
        ahead = False
        for ref in self.earlier:
            shown = self.messages[int(ref) - 1].text
            if int(ref) > first and text.startswith(shown):
                return Found(ref)
            ahead = ahead or (int(ref) > first and shown.startswith(text))
        return Found(ahead=ahead)


async def _stream(reply: StreamingReply, text: str, size: int = 4) -> None:
    for at in range(0, len(text), size):
        await reply.push(text[at : at + size])
        await asyncio.sleep(0.005)


async def test_a_whole_answer_posted_before_the_restart_is_adopted_not_sent_again() -> None:
    outbox = LookingOutbox([ANSWER], edit_interval=0.02)
    recorded: list[tuple[str, ...]] = []

    async def record(sent: tuple[str, ...]) -> None:
        recorded.append(sent)

    reply = StreamingReply(outbox, on_posted=record)
    await reply.finish(ANSWER)
    assert outbox.texts == [ANSWER]
    assert [kind for kind, _, _ in outbox.calls] == ["edit"]
    assert reply.sent == ("1",)
    assert recorded == [("1",)], "the adopted message is recorded like a sent one"


async def test_a_partial_is_found_while_streaming_and_finished_by_editing() -> None:
    outbox = LookingOutbox([ANSWER[:20]], edit_interval=0.02)
    reply = StreamingReply(outbox)
    await _stream(reply, ANSWER)
    await reply.finish()
    assert outbox.texts == [ANSWER]
    assert all(kind == "edit" for kind, _, _ in outbox.calls)


async def test_a_short_text_that_begins_another_answer_does_not_take_it_over() -> None:
    # The reply's first text ("answer to [m") begins the other answer too: it
    # waits for more text, which then tells the two apart.
    outbox = LookingOutbox([OTHER], edit_interval=0.02)
    reply = StreamingReply(outbox)
    await reply.push("answer to [m")
    await asyncio.wait_for(outbox.first_look.wait(), 10)
    await _stream(reply, ANSWER[len("answer to [m") :])
    await reply.finish()
    assert outbox.looked[0] == ("answer to [m", None)
    assert len(outbox.looked) >= 2, "a message ahead of the text is looked for again"
    assert outbox.texts == [OTHER, ANSWER]
    assert outbox.messages[0].edits == [], "another answer's message was edited"


async def test_the_lookup_comes_once_before_the_first_post_after_the_last_recorded() -> None:
    outbox = LookingOutbox([], max_chars=30, edit_interval=0.02)
    first = outbox.seed("answer to [m7] - the Chemitek")
    reply = StreamingReply(outbox, sent=(first,))
    await reply.finish(ANSWER)
    assert outbox.looked == [(ANSWER[len("answer to [m7] - the Chemitek ") :], first)]
    assert len(outbox.messages) == 2


async def test_nothing_found_posts_as_usual() -> None:
    outbox = LookingOutbox(["ein ganz anderer Text"], edit_interval=0.02)
    reply = StreamingReply(outbox)
    await reply.finish(ANSWER)
    assert outbox.texts == ["ein ganz anderer Text", ANSWER]
    assert len(outbox.looked) == 1
