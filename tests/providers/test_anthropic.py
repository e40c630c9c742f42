"""What the Anthropic provider puts on the wire, and the role-repair function."""

from __future__ import annotations

from chatbridge.core.models import Turn
from chatbridge.providers.anthropic import alternate_roles
from chatbridge.providers.base import InvalidRequest, Prompt
from tests.providers.conftest import KEY, TEXT, Backend, collect


async def test_system_is_a_cached_field_and_roles_alternate(anthropic_backend: Backend) -> None:
    prompt = Prompt(
        system="Be brief.",
        messages=(
            Turn("assistant", "Welcome!"),
            Turn("user", "Hi"),
            Turn("user", "Are you there?"),
            Turn("assistant", "Yes."),
            Turn("user", "Good"),
        ),
    )
    outcome = await collect(anthropic_backend.provider(max_tokens=77), prompt)
    assert outcome.text == TEXT
    body = anthropic_backend.fake.requests[0].body
    cached = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": cached}]
    assert body["messages"] == [
        {"role": "user", "content": "Hi\n\nAre you there?"},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": [{"type": "text", "text": "Good", "cache_control": cached}]},
    ]
    assert body["max_tokens"] == 77
    assert body["model"] == "anthropic-fake-model"
    assert body["stream"] is True


async def test_key_is_sent(anthropic_backend: Backend) -> None:
    await collect(anthropic_backend.provider())
    headers = anthropic_backend.fake.requests[0].headers
    # SDK 2.x sends `Authorization: Bearer`; older ones sent `x-api-key`.
    assert (headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")) == KEY


async def test_empty_system_prompt_is_left_out(anthropic_backend: Backend) -> None:
    await collect(anthropic_backend.provider(), Prompt("", (Turn("user", "Hi"),)))
    assert "system" not in anthropic_backend.fake.requests[0].body


async def test_prompt_without_user_turn_fails_before_any_request(
    anthropic_backend: Backend,
) -> None:
    outcome = await collect(anthropic_backend.provider(), Prompt("sys", (Turn("assistant", "x"),)))
    assert isinstance(outcome.error, InvalidRequest)
    assert "'main'" in str(outcome.error)
    assert anthropic_backend.fake.requests == []


async def test_pings_are_ignored(anthropic_backend: Backend) -> None:
    assert getattr(anthropic_backend.fake, "ping", False)  # the fake sends them by default
    outcome = await collect(anthropic_backend.provider())
    assert outcome.text == TEXT
    assert outcome.error is None


def test_alternate_roles_passes_a_well_formed_conversation_through() -> None:
    turns = [Turn("user", "a"), Turn("assistant", "b"), Turn("user", "c")]
    assert alternate_roles(turns) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]


def test_alternate_roles_drops_leading_assistant_turns() -> None:
    turns = [Turn("assistant", "hello"), Turn("assistant", "anyone?"), Turn("user", "hi")]
    assert alternate_roles(turns) == [{"role": "user", "content": "hi"}]


def test_alternate_roles_merges_runs_with_a_blank_line() -> None:
    turns = [
        Turn("user", "one"),
        Turn("user", "two"),
        Turn("assistant", "x"),
        Turn("assistant", "y"),
        Turn("user", "three"),
    ]
    assert alternate_roles(turns) == [
        {"role": "user", "content": "one\n\ntwo"},
        {"role": "assistant", "content": "x\n\ny"},
        {"role": "user", "content": "three"},
    ]


def test_alternate_roles_drops_empty_turns_before_merging() -> None:
    turns = [Turn("user", "a"), Turn("assistant", "  "), Turn("user", "b")]
    assert alternate_roles(turns) == [{"role": "user", "content": "a\n\nb"}]


def test_alternate_roles_treats_unknown_roles_as_user_and_does_not_mutate() -> None:
    turns = (Turn("system", "note"), Turn("user", "hi"))
    assert alternate_roles(turns) == [{"role": "user", "content": "note\n\nhi"}]
    assert turns == (Turn("system", "note"), Turn("user", "hi"))


def test_alternate_roles_of_nothing_is_nothing() -> None:
    assert alternate_roles([]) == []
    assert alternate_roles([Turn("assistant", "only me")]) == []
