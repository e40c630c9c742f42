"""The gate's per-message shortcuts give the answers they replace."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from chatbridge.core.ledger import Limits
from chatbridge.core.limits import Admitted, LimitGate, LimitPolicy, Meter, Price, ProviderTerms
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
