"""Issue 11.5 (core side): any Unicode from a platform is safe to store, send
and prompt with, and a very long message reaches the provider cut, with a note.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatbridge.core.incoming import CUT_NOTES, clean_text, cut_for_prompt
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.settings import EngineSettings
from tests.support import tally
from tests.support.fakes import RecordingOutbox
from tests.support.testbot import ALICE, TestBots

EXAMPLES = int(os.environ.get("CHATBRIDGE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")
_NOTE = re.compile(r"\n\n\[(?:Nachricht gekürzt|message cut): [\d.,]+ (?:von|of) [\d.,]+ \w+\]\Z")

any_char = st.one_of(
    st.characters(exclude_categories=()),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
    st.characters(max_codepoint=0x9F),  # C0, DEL, C1
    st.sampled_from(["\r\n", "\u2028", "\u202e", "\u200d", "\ufeff", "\U000e0041", "😀"]),
)
chunk = st.lists(any_char, min_size=1, max_size=40).map("".join)
# Mostly short texts, some up to 100k characters (a chunk repeated).
any_text = st.one_of(
    chunk,
    st.builds(
        lambda part, size: (part * (size // len(part) + 1))[:size], chunk, st.integers(0, 100_000)
    ),
)


@FUZZ
@given(text=any_text)
def test_clean_text_is_encodable_and_has_no_controls(text: str) -> None:
    tally.add("inputs fuzzed", "platform text (clean_text, hostile Unicode)")
    clean = clean_text(text)
    clean.encode("utf-8")  # raises on a surrogate
    json.dumps(clean, ensure_ascii=False).encode("utf-8")
    assert not _FORBIDDEN.search(clean)
    assert clean_text(clean) == clean
    assert len(clean) <= len(text)
    with sqlite3.connect(":memory:") as db:
        db.execute("create table t (v text)")
        db.execute("insert into t values (?)", (clean,))
        assert db.execute("select v from t").fetchone() == (clean,)


ORDINARY = ["Wort", " ", "  ", "\n", "\n\n", "\t", "ä", "ß", "😀", "👨\u200d👩\u200d👧", "שלום",
            "مرحبا", "你好", "<b>x</b>", "```py\nx = 1\n```", "x" * 50]  # fmt: skip


@FUZZ
@given(text=st.lists(st.sampled_from(ORDINARY), max_size=40).map("".join))
def test_clean_text_keeps_ordinary_text(text: str) -> None:
    tally.add("inputs fuzzed", "platform text (clean_text, ordinary)")
    assert clean_text(text) == text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\ud800b", "a\ufffdb"),
        ("\udc00", "\ufffd"),
        ("\ud83d\ude00", "😀"),  # a pair is the character it encodes
        ("a\x00b\x1b[31mred\x7f\x9b", "ab[31mred"),
        ("one\r\ntwo\rthree\u2028four\x85five\x0bsix", "one\ntwo\nthree\nfour\nfive\nsix"),
        (
            "\t\u202eRTL\u202c \u200d 👨\u200d👩\u200d👧",
            "\t\u202eRTL\u202c \u200d 👨\u200d👩\u200d👧",
        ),
    ],
)
def test_clean_text_examples(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


@FUZZ
@given(
    text=st.one_of(any_text, any_text.map(clean_text)),  # raw, and as the engine passes it
    limit=st.integers(1, 20_000),
    language=st.sampled_from(["de", "en", "fr"]),
)
def test_cut_for_prompt_stays_within_the_limit_plus_the_note(
    text: str, limit: int, language: str
) -> None:
    tally.add("inputs fuzzed", "long messages (cut_for_prompt)")
    cut = cut_for_prompt(text, limit, language)
    if len(text) <= limit:
        assert cut == text
        return
    note = _NOTE.search(cut)
    assert note is not None
    head = cut[: note.start()]
    assert len(head) <= limit
    assert text.startswith(head)


def test_the_note_is_in_the_bot_language() -> None:
    text = "wort " * 4000  # 20,000 characters
    assert cut_for_prompt(text, 12_345, "de").endswith(
        "\n\n[Nachricht gekürzt: 12.344 von 20.000 Zeichen]"
    )
    assert cut_for_prompt(text, 12_345, "en").endswith(
        "\n\n[message cut: 12,344 of 20,000 characters]"
    )
    assert set(CUT_NOTES) == {"de", "en"}


# -- through the engine ------------------------------------------------------------

HOSTILE = "Hallo\ud800 Welt\x00! \u202eUser: x\x1b[2J"


async def test_a_lone_surrogate_and_a_nul_get_an_answer_and_a_ring_entry(testbot: TestBots) -> None:
    """As the engine will hand it on once `accept` cleans the text (see below)."""
    bot = await testbot()
    reply = await bot.say(clean_text(HOSTILE))
    assert reply.startswith("echo: Hallo\ufffd Welt!")
    assert "\x00" not in bot.last_prompt_text
    ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
    assert [entry.user_message for entry in ring] == ["Hallo\ufffd Welt! \u202eUser: x[2J"]


async def test_raw_hostile_text_through_the_engine(testbot: TestBots) -> None:
    bot = await testbot()
    conversation = Conversation(platform="telegram", chat=ALICE, user=ALICE)
    outbox = RecordingOutbox()
    await bot.engine.handle(IncomingMessage(conversation=conversation, text=HOSTILE), outbox)
    assert outbox.texts
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)


async def test_a_long_message_reaches_the_provider_cut_with_a_note(testbot: TestBots) -> None:
    bot = await testbot(settings=EngineSettings(max_message_chars=1000))
    await bot.say("wort " * 4000)
    prompt = bot.last_prompt_text
    assert prompt.endswith("\n\n[Nachricht gekürzt: 999 von 20.000 Zeichen]")
    assert len(prompt) < 1100
    bot.clock.advance(31 * 60)  # a new session: the same message inside the bridge
    await bot.say("wort " * 4000, kind=ChatKind.PRIVATE)
    assert "[Nachricht gekürzt: 999 von 20.000 Zeichen]" in bot.last_prompt_text
    ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
    assert all(len(entry.user_message) <= 500 for entry in ring)
