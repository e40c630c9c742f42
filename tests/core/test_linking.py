"""/link and /unlink through the real engine and SQLite store (`core.links`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from chatbridge.core.models import ChatKind
from tests.support.cli import run_cli
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots

DISCORD, SLACK, MALLORY = "1234", "U0SLACK", "6666"
ALLOW = (f"telegram:{ALICE}", f"discord:{DISCORD}", f"slack:{SLACK}", f"discord:{MALLORY}",
         "telegram:-100")  # fmt: skip
_CODE = re.compile(r"/link ([A-Z0-9]{6,12})\b")


async def _bot(testbot: TestBots, **kw: object) -> TestBot:
    return await testbot(allow=ALLOW, **kw)  # type: ignore[arg-type]


def _code(reply: str) -> str:
    match = _CODE.search(reply)
    assert match is not None, reply
    return match.group(1)


async def _link(bot: TestBot) -> None:
    """Alice's Telegram offers, her Discord redeems."""
    code = _code(await bot.say("/link"))
    reply = await bot.say(f"/link {code}", platform="discord", user=DISCORD)
    assert reply.startswith("Verknüpft:"), reply


async def test_a_linked_id_shares_the_ring_and_the_code_works_once(testbot: TestBots) -> None:
    bot = await _bot(testbot)
    await bot.say("Check wo das Chemitek-Paket bleibt")
    code = _code(await bot.say("/link"))
    assert code not in "".join(p.messages[-1].content for p in bot.provider.prompts)
    done = await bot.say(f"/link {code.lower()}", platform="discord", user=DISCORD)
    assert done == (
        f"Verknüpft: telegram:{ALICE} und discord:{DISCORD} sind hier jetzt eine Person "
        "(eine Erinnerung, ein Satz Limits); /unlink macht das rückgängig."
    )
    await bot.say("Soll Mittwoch kommen", platform="discord", user=DISCORD)
    assert "User: Check wo das Chemitek-Paket bleibt" in bot.last_prompt_text
    again = await bot.say(f"/link {code}", platform="discord", user=MALLORY)
    assert again.startswith("Dieser Code ist falsch, benutzt oder abgelaufen")
    memory = await bot.say("/memory", platform="discord", user=DISCORD)
    assert "Chemitek-Paket" in memory
    assert "Soll Mittwoch kommen" in memory


async def test_a_code_expires_after_ten_minutes(testbot: TestBots) -> None:
    bot = await _bot(testbot)
    code = _code(await bot.say("/link"))
    bot.clock.advance(601)
    late = await bot.say(f"/link {code}", platform="discord", user=DISCORD)
    assert late.startswith("Dieser Code ist falsch")


async def test_five_wrong_codes_lock_link_for_an_hour(testbot: TestBots) -> None:
    bot = await _bot(testbot)
    code = _code(await bot.say("/link"))
    replies = [
        await bot.say(f"/link WRONG{n}XX", platform="discord", user=MALLORY) for n in range(5)
    ]
    assert all(r.startswith("Dieser Code ist falsch") for r in replies[:4])
    assert replies[4].startswith("/link ist nach fünf falschen Codes für dich gesperrt, bis ")
    # Even the right code is refused while locked, and stays unused.
    locked = await bot.say(f"/link {code}", platform="discord", user=MALLORY)
    assert locked.startswith("/link ist nach fünf falschen Codes")
    assert (await bot.say("/link", platform="discord", user=MALLORY)).startswith("/link ist")
    bot.clock.advance(3601)
    fresh = _code(await bot.say("/link"))
    assert (await bot.say(f"/link {fresh}", platform="discord", user=MALLORY)).startswith(
        "Verknüpft:"
    )


async def test_link_in_a_group_is_refused_in_one_sentence(testbot: TestBots) -> None:
    bot = await _bot(testbot)
    reply = await bot.say("/link", chat="-100", kind=ChatKind.GROUP)
    assert reply == "Konten verknüpfe ich nur im privaten Chat: Schick mir /link dort."
    assert _CODE.search(reply) is None


async def test_unlink_gives_each_id_what_was_written_from_it(testbot: TestBots) -> None:
    bot = await _bot(testbot, provider=ScriptedProvider(lambda prompt: ["Antwort."]))
    await bot.say("Telegram-Frage")
    await _link(bot)
    await bot.say("Discord-Frage", platform="discord", user=DISCORD)
    assert "User: Telegram-Frage" in bot.last_prompt_text  # linked: one ring
    unlinked = await bot.say("/unlink", platform="discord", user=DISCORD)
    assert unlinked.startswith(f"Getrennt: discord:{DISCORD} ist wieder eigenständig")
    await bot.say("/new", platform="discord", user=DISCORD)
    await bot.say("noch eine", platform="discord", user=DISCORD)
    assert "User: Discord-Frage" in bot.last_prompt_text
    assert "User: Telegram-Frage" not in bot.last_prompt_text
    await bot.say("/new")
    await bot.say("und Telegram?")
    assert "User: Telegram-Frage" in bot.last_prompt_text
    assert "User: Discord-Frage" not in bot.last_prompt_text
    none = await bot.say("/unlink", platform="discord", user=DISCORD)
    assert none == f"discord:{DISCORD} ist mit keinem anderen Konto verknüpft."


async def test_a_yaml_identity_cannot_link_or_unlink(testbot: TestBots) -> None:
    bot = await _bot(testbot, identities={"alice": [f"telegram:{ALICE}", f"slack:{SLACK}"]})
    for text in ("/link", "/unlink"):
        reply = await bot.say(text)
        assert reply.startswith("Deine Konten sind in der Konfiguration des Admins verbunden")
        assert "alice" in reply
    code = _code(await bot.say("/link", platform="discord", user=DISCORD))
    joined = await bot.say(f"/link {code}", platform="slack", user=SLACK)
    assert joined.startswith("Deine Konten sind in der Konfiguration")


async def test_forget_from_a_linked_id_forgets_the_person(testbot: TestBots) -> None:
    bot = await _bot(testbot)
    await bot.say("Telegram-Frage")
    await _link(bot)
    await bot.say("Discord-Frage", platform="discord", user=DISCORD)
    await bot.say("/forget", platform="discord", user=DISCORD)
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0) == []
    assert await bot.engine.store.ring(f"discord:{DISCORD}", since=0) == []


async def test_memory_show_and_forget_accept_any_linked_id(
    tmp_path: Path, testbot: TestBots
) -> None:
    bot = await _bot(testbot)
    await bot.say("Telegram-Frage")
    await _link(bot)
    bot.clock.advance(60)
    await bot.say("Discord-Frage", platform="discord", user=DISCORD)
    await bot.engine.store.aclose()
    (tmp_path / "chatbridge.yaml").write_text("memory:\n  path: bot.db\n")
    shown = await run_cli("memory", "show", "--user", f"discord:{DISCORD}", cwd=tmp_path)
    assert shown.code == 0, shown.stderr
    assert [e["user_message"] for e in json.loads(shown.stdout)] == [
        "Telegram-Frage",
        "Discord-Frage",
    ]
    forgot = await run_cli("memory", "forget", "--user", f"discord:{DISCORD}", cwd=tmp_path)
    assert forgot.code == 0, forgot.stderr
    assert "erased 2 memory entries" in forgot.stdout
    again = await run_cli("memory", "show", "--user", f"telegram:{ALICE}", cwd=tmp_path)
    assert json.loads(again.stdout) == []
