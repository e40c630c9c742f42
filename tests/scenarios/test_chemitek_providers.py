"""The seed's story through `chatbridge chat` with real SDKs against fake LLM servers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.chemitek import CONFUSED, FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import ChatSession
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import Fault, Reply


async def _story(chat: ChatSession, *, pause: float) -> tuple[str, str]:
    await chat.send(FIRST)
    first = await chat.read_until("09.04.")
    await asyncio.sleep(pause)
    await chat.send(SECOND)
    second = await chat.read_until("\n\n")
    code, _, stderr = await chat.close()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    return first, second


async def test_openai_key_in_the_environment_is_picked_and_bridges_the_gap(
    tmp_path: Path,
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("engine:\n  session_ttl: 1s\n")
    async with FakeOpenAI(api_key="sk-test-chemitek") as fake:
        fake.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        env = {"OPENAI_API_KEY": "sk-test-chemitek", "OPENAI_BASE_URL": fake.base_url}
        chat = await ChatSession.start(cwd=tmp_path, env=env)
        banner = await chat.read_until("\n")
        first, second = await _story(chat, pause=1.5)

    assert "provider: openai" in banner
    assert "OPENAI_API_KEY" in banner
    assert "sk-test-chemitek" not in banner
    assert TRACKING in first
    assert UNDERSTOOD in second
    sent = fake.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user"], "a new session: no old turns"
    assert sent[1]["content"].startswith("<conversation_history>")
    assert sent[1]["content"].endswith(f"Aktuelle Nachricht: {SECOND}")


async def test_without_the_bridge_the_model_would_be_lost(tmp_path: Path) -> None:
    """Control: with inject_entries 0 the same story ends in the seed's confusion."""
    config = "engine:\n  session_ttl: 1s\nmemory:\n  inject_entries: 0\n"
    (tmp_path / "chatbridge.yaml").write_text(config)
    async with FakeOpenAI() as fake:
        fake.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        env = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": fake.base_url}
        chat = await ChatSession.start("--quiet", cwd=tmp_path, env=env)
        _, second = await _story(chat, pause=1.5)
    assert CONFUSED in second


async def test_configured_chain_falls_back_from_openai_to_anthropic(tmp_path: Path) -> None:
    async with FakeOpenAI() as openai_fake, FakeAnthropic() as anthropic_fake:
        openai_fake.script(*[Fault.server_error(retry_after=0.01)] * 6)  # 3 per message
        anthropic_fake.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        (tmp_path / "chatbridge.yaml").write_text(
            "engine:\n  session_ttl: 1s\n"
            "providers:\n"
            "  default: main\n"
            "  fallback: [backup]\n"
            "  main:\n"
            "    type: openai\n"
            "    model: gpt-test\n"
            "    api_key: sk-main\n"
            f"    base_url: {openai_fake.base_url}\n"
            "    max_retries: 2\n"
            "  backup:\n"
            "    type: anthropic\n"
            "    model: claude-test\n"
            "    api_key: sk-backup\n"
            f"    base_url: {anthropic_fake.base_url}\n"
        )
        chat = await ChatSession.start(cwd=tmp_path)
        banner = await chat.read_until("\n")
        first, second = await _story(chat, pause=1.5)

    assert "main (openai gpt-test) -> backup (anthropic claude-test)" in banner
    assert TRACKING in first
    assert UNDERSTOOD in second
    assert len(openai_fake.requests) == 6, "per message: the SDK retried twice, then failover"
    (system,) = anthropic_fake.requests[-1].body["system"]  # one block, marked for the cache
    assert system["text"] == "You are a helpful assistant."


async def test_when_every_provider_is_down_the_user_gets_one_sentence(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        fake.script(*[Fault.server_error(retry_after=0.01)] * 9)
        (tmp_path / "chatbridge.yaml").write_text(
            "providers:\n  main:\n    type: openai\n    model: m\n    api_key: k\n"
            f"    base_url: {fake.base_url}\n    max_retries: 0\n"
        )
        chat = await ChatSession.start("--quiet", cwd=tmp_path)
        await chat.send(FIRST)
        reply = await chat.read_until("\n\n")
        code, _, stderr = await chat.close()
    assert code == 0
    assert reply.strip() == (
        "Der KI-Dienst (main) antwortet gerade nicht. "
        "Bitte versuch es in ein paar Minuten noch einmal."
    )
    assert "Traceback" not in stderr


async def test_anthropic_key_in_the_environment_is_picked_when_openai_has_none(
    tmp_path: Path,
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("engine:\n  session_ttl: 1s\n")
    async with FakeAnthropic() as fake:
        fake.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": fake.base_url}
        chat = await ChatSession.start(cwd=tmp_path, env=env)
        banner = await chat.read_until("\n")
        first, second = await _story(chat, pause=1.5)
    assert "provider: anthropic claude-sonnet-4-6 (from ANTHROPIC_API_KEY)" in banner
    assert TRACKING in first
    assert UNDERSTOOD in second
    body = fake.requests[-1].body
    assert body["model"] == "claude-sonnet-4-6"
    (first,) = body["messages"][0]["content"]  # the newest message carries the cache mark
    assert first["text"].startswith("<conversation_history>")
