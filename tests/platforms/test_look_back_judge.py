"""`judge` (platforms/_look_back.py): which of the bot's messages after a question
a restarted process adopts. Only a message whose text begins the text about to
be posted is adopted; one that a short text merely begins is `ahead`."""

from __future__ import annotations

from chatbridge.core.ports import Found
from chatbridge.platforms._look_back import TakenHere, judge

ANSWER = "answer to [m7] - the parcel leaves on Wednesday."
OTHER = "answer to [m3] - the parcel leaves on Wednesday."


def test_the_first_message_that_begins_the_text_is_adopted() -> None:
    mine = [("c:1", OTHER), ("c:2", "answer to [m7] -  the\nparcel"), ("c:3", ANSWER)]
    assert judge(mine, [ANSWER]) == Found("c:2")


def test_a_message_a_short_text_only_begins_is_ahead_not_adopted() -> None:
    assert judge([("c:1", OTHER)], ["answer to [m"]) == Found(ahead=True)
    assert judge([("c:1", OTHER)], [ANSWER]) == Found()


def test_a_rendered_candidate_counts_and_empty_texts_never_match() -> None:
    assert judge([("c:1", "*fett* und mehr")], ["**fett** und", "*fett* und mehr dazu"]) == Found(
        "c:1"
    )
    assert judge([("c:1", "  ")], [ANSWER]) == Found()
    assert judge([("c:1", ANSWER)], ["  "]) == Found()


async def test_taken_here_remembers_only_what_the_inbox_took_as_new() -> None:
    from chatbridge.platforms._runtime import Taken

    async def outcome(taken: Taken) -> Taken:
        return taken

    seen = TakenHere(limit=2)
    assert await seen.take("a", outcome(Taken.NEW)) is Taken.NEW
    assert await seen.take("b", outcome(Taken.DUPLICATE)) is Taken.DUPLICATE
    assert "a" in seen
    assert "b" not in seen, "held before this process: its answer may be out already"
    assert await seen.take("a", outcome(Taken.DUPLICATE)) is Taken.DUPLICATE
    assert "a" in seen, "a redelivery of what this process took stays its own"
    for key in ("c", "d"):
        await seen.take(key, outcome(Taken.NEW))
    assert "a" not in seen, "bounded: the oldest is forgotten"
