"""Issue 20: the scope resolver and the engine reading its result.

Real engine, real SQLite; the providers are in-process `ScriptedProvider`s
(our own Protocol), one per provider entry and model, as the composition
root would build them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage, Turn
from chatbridge.core.places import PlaceSettings, ScopeResolver, SessionModels, chain_of
from chatbridge.stores._codec import message_from_json, message_to_json
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider

GROUP = ("telegram:-100", "telegram")
THREAD = ("discord:9", "discord:5", "discord:guild:1", "discord")
DEFAULTS: dict[str, tuple[object, str]] = {
    "system_prompt": ("TOP", "bot.system_prompt"),
    "provider": ("main", "providers.default"),
    "model": ("gpt-main", "providers.main.model"),
    "language": ("de", "bot.language"),
    "session_ttl": (1800.0, "engine.session_ttl"),
    "require_mention": (True, "built-in default"),
}


class Chains:
    """`ProviderChains` for the tests: one scripted provider per (entry, model)."""

    def __init__(self) -> None:
        self.built: dict[tuple[str, str], ScriptedProvider] = {}

    def __call__(self, name: str, model: str) -> ScriptedProvider:
        if (name, model) not in self.built:
            provider = ScriptedProvider(f"{name}/{model}", name=name)
            provider.model = model
            self.built[(name, model)] = provider
        return self.built[(name, model)]


def resolver(
    scopes: dict[str, dict[str, object]], default: ScriptedProvider | None = None
) -> tuple[ScopeResolver, Chains, ScriptedProvider]:
    chains = Chains()
    main = default or ScriptedProvider("main/gpt-main", name="main")
    main.model = "gpt-main"
    built = ScopeResolver(
        base=EngineSettings(system_prompt="TOP"),
        provider=main,
        defaults=DEFAULTS,
        scopes=scopes,
        models={"main": "gpt-main", "backup": "claude-backup"},
        chains=chains,
    )
    return built, chains, main


def test_key_by_key_most_specific_first() -> None:
    places, _, _ = resolver(
        {
            "discord:guild:1": {"system_prompt": "GUILD", "language": "en"},
            "discord:5": {"model": "gpt-channel"},
            "discord": {"language": "de", "session_ttl": 60.0},
        }
    )
    place = places.resolve(THREAD)
    assert place.settings.system_prompt == "GUILD"
    assert place.model == "gpt-channel"
    assert place.settings.language == "en"  # the server's beats the platform's
    assert place.settings.session_ttl == 60.0
    assert place.scope == "discord:5"
    assert dict(place.sources) | {} == {
        "system_prompt": "discord:guild:1",
        "provider": "providers.default",
        "model": "discord:5",
        "language": "discord:guild:1",
        "session_ttl": "discord",
        "require_mention": "built-in default",
    }


def test_a_scopes_provider_brings_its_own_model_unless_a_scope_sets_one() -> None:
    places, chains, main = resolver(
        {
            "discord:guild:1": {"model": "gpt-big"},  # main's model, for the whole server
            "discord:5": {"provider": "backup"},
            "slack:C0TEAM": {"provider": "backup", "model": "claude-small"},
        }
    )
    place = places.resolve(THREAD)
    assert (place.provider_name, place.model) == ("backup", "claude-backup")
    assert place.sources["model"] == "providers.backup.model"
    assert place.provider is chains.built[("backup", "claude-backup")]
    assert places.resolve(("slack:C0TEAM", "slack")).model == "claude-small"
    # No scope: the engine's own provider, not a second instance of it.
    assert places.resolve(("telegram:1", "telegram")).provider is main
    assert (
        places.resolve(("discord:guild:1", "discord")).provider is chains.built[("main", "gpt-big")]
    )


def test_unknown_places_get_the_top_level_values_and_no_scope() -> None:
    places, _, main = resolver({"telegram:-100": {"system_prompt": "GROUP"}})
    place = places.resolve(("telegram:-999", "telegram"))
    assert (place.settings.system_prompt, place.scope, place.metric_scope) == (
        "TOP",
        "",
        "default",
    )
    assert place.provider is main
    assert place.model_label == "gpt-main (main)"


def test_one_resolution_per_combination_of_matching_scopes() -> None:
    places, _, _ = resolver({"telegram": {"language": "en"}})
    first = places.resolve(("telegram:1", "telegram"))
    assert places.resolve(("telegram:2", "telegram")) is first


def test_require_mention_is_read_per_place() -> None:
    places, _, _ = resolver({"telegram:-100": {"require_mention": False}})
    assert places.requires_mention(GROUP) is False
    assert places.requires_mention(("telegram:-200", "telegram")) is True


def test_a_message_without_a_place_is_in_its_chat_and_platform() -> None:
    conversation = Conversation("telegram", "-100", "7", kind=ChatKind.GROUP)
    assert chain_of(IncomingMessage(conversation, "x")) == GROUP
    assert chain_of(IncomingMessage(conversation, "x", place=THREAD)) == THREAD


def test_the_inbox_keeps_place_and_addressed() -> None:
    conversation = Conversation("discord", "5", "7", "9", ChatKind.GROUP)
    message = IncomingMessage(conversation, "hi", event_id="1", place=THREAD, addressed=False)
    assert message_from_json(message_to_json(message)) == message
    plain = IncomingMessage(conversation, "hi", event_id="2")
    assert "place" not in message_to_json(plain)
    assert message_from_json(message_to_json(plain)) == plain


def test_session_models_only_flag_a_change() -> None:
    seen = SessionModels(limit=2)
    assert not seen.changed("a", "main\0m1")
    seen.remember("a", "main\0m1")
    assert not seen.changed("a", "main\0m1")
    assert seen.changed("a", "main\0m2")
    seen.remember("b", "x")
    seen.remember("c", "x")
    assert not seen.changed("a", "other"), "the oldest entry should have been forgotten"


async def _engine(
    closing: Closing, tmp_path: Path, places: ScopeResolver, main: ScriptedProvider
) -> Engine:
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    closing(store)
    return Engine(
        EngineSettings(system_prompt="TOP"),
        store=store,
        provider=main,
        access=AccessPolicy(allow=("telegram:1",)),
        clock=ManualClock(),
        places=places,
    )


async def test_the_engine_answers_with_the_places_prompt_provider_and_status(
    tmp_path: Path, closing: Closing
) -> None:
    places, chains, main = resolver(
        {"telegram:-100": {"system_prompt": "GROUP", "provider": "backup", "language": "en"}}
    )
    engine = await _engine(closing, tmp_path, places, main)
    group = Conversation("telegram", "-100", "1", kind=ChatKind.GROUP)
    outbox = RecordingOutbox()
    await engine.handle(IncomingMessage(group, "Frage", place=GROUP), outbox)
    backup = chains.built[("backup", "claude-backup")]
    assert [p.system for p in backup.prompts] == ["GROUP"]
    assert main.prompts == []
    status = RecordingOutbox()
    await engine.handle(IncomingMessage(group, "/status", place=GROUP), status)
    assert "Scope: telegram:-100" in status.texts[0]
    assert "claude-backup (backup)" in status.texts[0]
    private = Conversation("telegram", "1", "1")
    status = RecordingOutbox()
    await engine.handle(IncomingMessage(private, "/status"), status)
    assert "Scope: none" in status.texts[0]
    assert "Modell: gpt-main (main)" in status.texts[0]
    assert 'scope="telegram:-100"' in engine.metrics.render().decode()


async def test_unaddressed_chatter_from_a_stranger_gets_no_denial(
    tmp_path: Path, closing: Closing
) -> None:
    places, _, main = resolver({"telegram:-100": {"require_mention": False}})
    engine = await _engine(closing, tmp_path, places, main)
    stranger = Conversation("telegram", "-100", "666", kind=ChatKind.GROUP)
    quiet, asked = RecordingOutbox(), RecordingOutbox()
    await engine.handle(
        IncomingMessage(stranger, "hallo alle", place=GROUP, addressed=False), quiet
    )
    await engine.handle(IncomingMessage(stranger, "@bot hallo", place=GROUP), asked)
    assert quiet.texts == []
    assert "telegram:666" in asked.texts[0]
    assert main.prompts == []


async def test_a_reload_that_changes_the_model_starts_a_new_session(
    tmp_path: Path, closing: Closing
) -> None:
    places, _, main = resolver({})
    engine = await _engine(closing, tmp_path, places, main)
    private = Conversation("telegram", "1", "1")
    await engine.handle(IncomingMessage(private, "eins"), RecordingOutbox())
    await engine.handle(IncomingMessage(private, "zwei"), RecordingOutbox())
    assert len(main.prompts[-1].messages) == 3  # the live session went on
    reloaded, chains, _ = resolver({"telegram": {"model": "gpt-new"}}, default=main)
    engine.reconfigure(engine.settings, provider=main, access=engine.access, places=reloaded)
    await engine.handle(IncomingMessage(private, "drei"), RecordingOutbox())
    new = chains.built[("main", "gpt-new")].prompts[-1]
    assert len(new.messages) == 1, "the session of the old model was continued"
    assert new.messages[0].content.startswith("<conversation_history>")
    assert "zwei" in new.messages[0].content


async def test_a_scope_pool_is_shared_by_its_place_and_nobody_else(
    tmp_path: Path, closing: Closing
) -> None:
    """Issue 21: two users in a pooled group draw on one pool and are refused
    together once it is spent; a user in another chat and the same user's DM
    are not held by it. A channel inheriting its server's `limits` shares the
    server's pool. Real SQLite ledger."""
    from chatbridge.core.limits import Admitted, LimitGate, LimitPolicy, Meter, ProviderTerms
    from chatbridge.core.ports import Prompt

    places, _, _ = resolver(
        {
            "telegram:-100": {"limits": {"tokens_per_day": 700}},
            "discord:guild:1": {"limits": {"tokens_per_day": 50}},
        }
    )
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    closing(store)
    gate = LimitGate(
        LimitPolicy(terms={"main": ProviderTerms(max_tokens=200)}),
        store=store,
        clock=ManualClock(),
        timezone=None,
    )
    prompt = Prompt(system="", messages=(Turn("user", "x" * 76),))  # worst case 300 tokens
    group, other, dm = (
        places.resolve(GROUP),
        places.resolve(("telegram:-200", "telegram")),
        places.resolve(("telegram:1", "telegram")),
    )

    async def ask(user: str, place: PlaceSettings) -> str:
        accounts = gate.accounts(f"telegram:{user}", f"telegram:{user}", admin=False, place=place)
        admitted = await gate.admit(prompt, accounts=accounts)
        if not isinstance(admitted, Admitted):
            return gate.refusal(admitted, language="en", accounts=accounts)
        await store.ledger_settle(gate.settlement(admitted, Meter(), completed=True))
        return "answered"

    assert await ask("1", group) == "answered"
    assert await ask("2", group) == "answered"  # 600 of 700 spent, by two people
    refusal = "Sorry, that would go past this chat's shared daily token limit"
    assert (await ask("1", group)).startswith(refusal)
    assert (await ask("2", group)).startswith(refusal)
    assert await ask("3", other) == "answered"
    assert await ask("1", dm) == "answered"
    assert await ask("1", dm) == "answered"
    rows = {row.account: row.tally for row in await store.ledger_rows(since_day="2000-01-01")}
    assert rows["scope:telegram:-100"].tokens == 600
    assert rows["scope:telegram:-100"].refused == 2
    assert rows["person:telegram:1"].tokens == 900  # the group and the DM, unlimited alone
    assert not any(key.startswith("scope:telegram:-200") for key in rows)
    # A channel in a server with a pool draws on the server's, keyed by the server.
    channel = places.resolve(THREAD)
    pool = gate.accounts("discord:7", "discord:7", admin=False, place=channel)[1]
    assert (pool.key, pool.limits.tokens_per_day) == ("scope:discord:guild:1", 50)
    assert (await ask("4", channel)).startswith(refusal)
    # With admins_exempt an admin passes the spent pool, and the pool still counts it.
    gate.policy = replace(gate.policy, admins_exempt=True)
    admin = gate.accounts("telegram:1", "telegram:1", admin=True, place=group)
    admitted = await gate.admit(prompt, accounts=admin)
    assert isinstance(admitted, Admitted)
    await store.ledger_settle(gate.settlement(admitted, Meter(), completed=True))
    rows = {row.account: row.tally for row in await store.ledger_rows(since_day="2000-01-01")}
    assert rows["scope:telegram:-100"].tokens == 900
    assert (await ask("2", group)).startswith(refusal)
