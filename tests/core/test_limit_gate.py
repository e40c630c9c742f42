"""The gate's per-message shortcuts give the answers they replace."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from chatbridge.core.ledger import Limits
from chatbridge.core.limits import (
    Admitted,
    LimitGate,
    LimitPolicy,
    Meter,
    Price,
    ProviderTerms,
    images_in,
    prompt_tokens_bound,
    utf8_bytes,
)
from chatbridge.core.models import MediaPart, Turn
from chatbridge.core.ports import Prompt
from chatbridge.stores.sqlite import SqliteStore
from tests.support.fakes import ManualClock

BERLIN = ZoneInfo("Europe/Berlin")


def _gate(tmp_path: Path, policy: LimitPolicy) -> LimitGate:
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    return LimitGate(policy, store=store, clock=ManualClock(), timezone=BERLIN)


def test_the_day_changes_at_local_midnight_within_one_cached_second(tmp_path: Path) -> None:
    gate = _gate(tmp_path, LimitPolicy())
    midnight = datetime(2027, 1, 1, tzinfo=BERLIN).timestamp()
    assert gate.periods(midnight - 1.0) == ("2026-12-31", "2026-12")
    assert gate.periods(midnight - 0.001) == ("2026-12-31", "2026-12")  # cached second
    assert gate.periods(midnight) == ("2027-01-01", "2027-01")
    assert gate.periods(midnight + 0.5) == ("2027-01-01", "2027-01")


def test_cached_accounts_follow_person_and_admin_exemption(tmp_path: Path) -> None:
    small, own = Limits(tokens_per_day=10), Limits(tokens_per_day=99)
    policy = LimitPolicy(default=small, people={"alice": own}, admins_exempt=True)
    gate = _gate(tmp_path, policy)
    for _ in range(2):  # the second round is answered from the cache
        assert gate.accounts("bob", "telegram:2", admin=False)[0].limits == small
        assert gate.accounts("alice", "telegram:1", admin=False)[0].limits == own
        assert gate.accounts("alice", "telegram:1", admin=True)[0].limits == Limits()
        assert gate.accounts("alice", "telegram:1", admin=False)[0].key == "person:alice"


async def test_images_hold_each_providers_dearest_image_and_unreported_counts_it(
    tmp_path: Path,
) -> None:
    price = Price(input_per_mtok=1.0, output_per_mtok=2.0)
    policy = LimitPolicy(
        default=Limits(tokens_per_day=100_000),
        terms={
            "openai": ProviderTerms(max_tokens=100, price=price, image_tokens=4_000),
            "claude": ProviderTerms(max_tokens=50, price=price, image_tokens=4_800),
            "blind": ProviderTerms(max_tokens=300, image_tokens=0),
        },
    )
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    gate = LimitGate(policy, store=store, clock=ManualClock(), timezone=BERLIN)
    image = MediaPart("image", "image/png", b"iVBORw0K")
    prompt = Prompt(
        system="",
        messages=(Turn("user", "earlier", parts=(image,)), Turn("user", "now", parts=(image,))),
    )
    text = 16 + (7 + 8) + (3 + 8)  # the text bound: bytes, 8 per message, 16 per request
    accounts = gate.accounts("alice", "telegram:1", admin=False)
    try:
        admitted = await gate.admit(prompt, accounts=accounts)
    finally:
        await store.aclose()
    assert isinstance(admitted, Admitted)
    # The dearest of the chain: two images at 4,800 plus 50 out beat 2 x 4,000 + 100.
    assert admitted.hold.tokens == text + 2 * 4_800 + 50
    assert admitted.hold.nano_usd == price.nano(text + 2 * 4_800, 50)
    unreported = gate.settlement(admitted, Meter(), completed=True)
    assert (unreported.tokens_in, unreported.tokens_out) == (text + 2 * 4_800, 50)


def test_prompt_bound_counts_utf8_bytes_wherever_a_non_ascii_text_is() -> None:
    def bound(system: str, *texts: str) -> int:
        return prompt_tokens_bound(Prompt(system=system, messages=tuple(map(_user, texts))))

    # 16 per request, 8 per message, a byte per ASCII character.
    assert bound("sys", "hello", "ab") == 16 + 3 + (8 + 5) + (8 + 2)
    assert bound("") == 16
    # "ü" and "€" are 2 and 3 bytes in UTF-8, in the system prompt or in any turn.
    assert bound("süß", "hello") == 16 + 5 + (8 + 5)
    assert bound("sys", "hello", "5 €") == 16 + 3 + (8 + 5) + (8 + 5)
    assert bound("sys", "😀") == 16 + 3 + (8 + 4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=[])), max_size=200))
def test_utf8_bytes_is_the_encoded_length_also_when_asked_again(texts: list[str]) -> None:
    """`utf8_bytes` keeps the lengths it computed: asked again, or after its
    oldest are dropped, it answers what encoding the text gives."""
    for text in [*texts, *reversed(texts)]:
        assert utf8_bytes(text) == len(text.encode("utf-8", "surrogatepass"))


def test_images_in_counts_image_parts_only() -> None:
    image = MediaPart("image", "image/png", b"iVBORw0K")
    pdf = MediaPart("document", "application/pdf", b"JVBERi0")
    plain = Prompt(system="", messages=(_user("a"), _user("b")))
    mixed = Prompt(
        system="",
        messages=(
            _user("a"),
            Turn("user", "b", parts=(image, pdf)),
            Turn("user", "c", parts=(image,)),
        ),
    )
    assert images_in(plain) == 0
    assert images_in(mixed) == 2


def test_worst_without_images_takes_the_largest_answer_and_dearest_price() -> None:
    cheap, dear = Price(1.0, 2.0), Price(3.0, 15.0)
    policy = LimitPolicy(
        terms={
            "a": ProviderTerms(max_tokens=100, price=cheap),
            "b": ProviderTerms(max_tokens=400, price=dear),
            "c": ProviderTerms(max_tokens=900),
        }
    )
    assert policy.worst(1000) == (1900, dear.nano(1000, 400))
    assert LimitPolicy().worst(1000) == (1000 + ProviderTerms().max_tokens, 0)
    unpriced = LimitPolicy(terms={"c": ProviderTerms(max_tokens=900)})
    assert unpriced.worst(10) == (910, 0)


def _user(text: str) -> Turn:
    return Turn("user", text)
