"""A link made through one replica counts on the other from its next message.

Two engines with their own Redis clients on one prefix, each with its own
limit gate (as two `chatbridge run` processes have). The other replica has
just answered the Telegram ID, so anything it kept of that ID would be warm;
the Discord ID's person has spent its day. Once the two are linked through
the first replica, the second refuses the Telegram ID's next message on the
person's spent account; after /unlink it answers it on the ID's own again.
The check is the store's, inside the reserve (`Hold.sender`): the answer
path makes no link lookup of its own.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.ledger import Limits, Settlement
from chatbridge.core.limits import LimitGate, LimitPolicy, ProviderTerms
from chatbridge.stores.redis import RedisStore
from tests.stores.helpers import purge_redis
from tests.support.fakes import ManualClock, ScriptedProvider, latest_noon
from tests.support.redis_server import redis_unavailable, redis_url
from tests.support.testbot import TestBot

pytestmark = pytest.mark.slow

TELEGRAM, DISCORD = "579304651", "1234"
LIMIT = 10_000
_CODE = re.compile(r"/link ([A-Z0-9]{6,12})\b")

Make = Callable[[ManualClock], Awaitable[tuple[TestBot, RedisStore]]]


@pytest.fixture
def prefix() -> Iterator[str]:
    if reason := redis_unavailable():
        pytest.skip(reason)
    name = f"cbtest:relink:{uuid.uuid4().hex[:12]}:"
    yield name
    purge_redis(name)


@pytest.fixture
async def make(prefix: str) -> AsyncIterator[Make]:
    stores: list[RedisStore] = []

    async def build(clock: ManualClock) -> tuple[TestBot, RedisStore]:
        store = RedisStore(redis_url(), max_entries=20, prefix=prefix)
        await store.open()
        stores.append(store)
        provider = ScriptedProvider("Mittwoch.")
        policy = LimitPolicy(
            default=Limits(tokens_per_day=LIMIT),
            terms={provider.name: ProviderTerms(max_tokens=100)},
        )
        engine = Engine(
            EngineSettings(language="de"),
            store=store,
            provider=provider,
            access=AccessPolicy(allow=(f"telegram:{TELEGRAM}", f"discord:{DISCORD}")),
            clock=clock,
            limits=LimitGate(policy, store=store, clock=clock, timezone=None),
        )
        return TestBot(engine, clock, provider), store

    yield build
    for store in stores:
        await store.aclose()


async def test_a_link_made_on_one_replica_counts_on_the_other_at_once(make: Make) -> None:
    clock = ManualClock(latest_noon())
    (first, store), (other, _) = await make(clock), await make(clock)
    gate = other.engine.limits
    assert gate is not None
    day, month = gate.periods(clock.now())
    spent = Settlement("spent", (f"person:discord:{DISCORD}",), day, month, LIMIT, 0, 0)
    await store.ledger_settle(spent)  # the Discord person's day is used up

    assert await other.say("Wann kommt das Paket?", user=TELEGRAM) == "Mittwoch."
    code = _CODE.search(await first.say("/link", platform="discord", user=DISCORD))
    assert code is not None
    linked = await first.say(f"/link {code.group(1)}", user=TELEGRAM)
    assert linked.startswith("Verknüpft:"), linked

    asked = len(other.provider.prompts)
    refused = await other.say("Und das zweite?", user=TELEGRAM)
    assert "dein tägliches Token-Limit" in refused, refused
    assert len(other.provider.prompts) == asked, "no model request on a spent person"

    assert (await first.say("/unlink", user=TELEGRAM)).strip()
    assert await other.say("Und jetzt?", user=TELEGRAM) == "Mittwoch."
    rows = {r.account: r.tally for r in await store.ledger_rows(since_day=day)}
    assert rows[f"person:discord:{DISCORD}"].refused == 1
    assert rows[f"person:telegram:{TELEGRAM}"].requests == 2
    assert rows[f"person:telegram:{TELEGRAM}"].refused == 0
