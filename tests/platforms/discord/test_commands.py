"""Slash commands: synced only when the set changed; deferred, answered ephemerally."""

from __future__ import annotations

from pathlib import Path

from tests.platforms.discord.conftest import ALLOWED, Launch
from tests.support.fake_discord import CHANNEL_ID, EPHEMERAL, USER_ID, FakeDiscord
from tests.support.testbot import TestBots


async def test_commands_are_synced_once_and_not_again_when_unchanged(
    fake: FakeDiscord, launch: Launch, tmp_path: Path
) -> None:
    first = await launch()
    names = {name.lstrip("/") for name, _ in first.bot.engine.commands}
    assert {"new", "forget", "memory", "help", "status"} <= names
    assert len(fake.command_syncs) == 1
    assert {c["name"] for c in fake.commands} == names
    await first.platform.aclose()
    await launch()  # a restart with the same command set
    assert len(fake.command_syncs) == 1, "an unchanged command set was synced again"
    assert len(fake.calls_to("GET /applications/*/commands")) == 2


async def test_a_changed_command_set_is_synced(fake: FakeDiscord, launch: Launch) -> None:
    fake.commands = [{"id": "1", "name": "old", "description": "gone", "type": 1}]
    await launch()
    assert len(fake.command_syncs) == 1
    assert "old" not in {c["name"] for c in fake.commands}


async def test_a_slash_command_is_deferred_and_answered_ephemerally(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    await fake.send_dm("Merk dir: Paket kommt Mittwoch")
    await running.ring()
    record = await fake.send_slash_command("memory", channel_id=CHANNEL_ID)
    await fake.wait_for(lambda: bool(record.followups))
    assert record.response_type == 5, "the interaction was not deferred"
    assert record.ephemeral
    answer = record.followups[0]
    assert answer.flags & EPHEMERAL
    # The ring entry came from a DM: in a guild channel /memory must not show it.
    assert "Paket kommt Mittwoch" not in answer.content
    dm = await fake.send_slash_command("memory", channel_id=fake.dm_channel())
    await fake.wait_for(lambda: bool(dm.followups))
    assert "Paket kommt Mittwoch" in "\n".join(m.content for m in dm.followups)
    assert running.prompts == ["Merk dir: Paket kommt Mittwoch"]


async def test_a_stranger_gets_the_access_reply_ephemerally(
    fake: FakeDiscord, launch: Launch
) -> None:
    await launch()
    stranger = USER_ID + 100
    record = await fake.send_slash_command("help", author=stranger)
    await fake.wait_for(lambda: bool(record.followups))
    assert f"discord:{stranger}" in record.followups[0].content
    assert record.followups[0].flags & EPHEMERAL


async def test_new_via_slash_command_opens_a_fresh_session(
    fake: FakeDiscord, launch: Launch, tmp_path: Path, testbot: TestBots
) -> None:
    home = tmp_path / "own"
    home.mkdir()
    bot = await testbot(home, allow=ALLOWED)
    running = await launch(bot=bot)
    await fake.send_dm("eins")
    await running.ring()
    record = await fake.send_slash_command("new", channel_id=fake.dm_channel())
    await fake.wait_for(lambda: bool(record.followups))
    await fake.send_dm("zwei")
    await running.ring(count=2)
    last = bot.provider.prompts[-1]
    assert "eins" not in [m.content for m in last.messages if m.role == "user"]


async def test_link_as_a_slash_command_with_a_code_option(
    fake: FakeDiscord, launch: Launch, tmp_path: Path, testbot: TestBots
) -> None:
    home = tmp_path / "own"
    home.mkdir()
    bot = await testbot(home, allow=(*ALLOWED, "telegram:579304651"))
    await launch(bot=bot)
    link = next(c for c in fake.commands if c["name"] == "link")
    assert [o["name"] for o in link["options"]] == ["code"]
    offered = await bot.say("/link")  # Alice's Telegram offers a code
    code = offered.split("/link ", 1)[1].split()[0]
    record = await fake.send_slash_command("link", {"code": code}, channel_id=fake.dm_channel())
    await fake.wait_for(lambda: bool(record.followups))
    assert record.followups[0].content.startswith("Verknüpft: telegram:579304651 und discord:")
    group = await fake.send_slash_command("link", channel_id=CHANNEL_ID)
    await fake.wait_for(lambda: bool(group.followups))
    assert group.followups[0].content.startswith("Konten verknüpfe ich nur im privaten Chat")
