"""The seed's story through `chatbridge chat`, with no API key and a 1 s TTL.

Fifty minutes become one second: the first message is answered, the session
expires, and the next prompt must carry the earlier exchange in a
`<conversation_history>` block so "Soll Mittwoch kommen" can be resolved.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.support.cli import ChatSession


async def test_chemitek_story_through_chatbridge_chat(tmp_path: Path) -> None:
    (tmp_path / "chatbridge.yaml").write_text("engine:\n  session_ttl: 1s\n")
    chat = await ChatSession.start(cwd=tmp_path)
    banner = await chat.read_until("\n")
    assert "provider: debug" in banner
    assert "store: sqlite data/chatbridge.db" in banner

    await chat.send("Check wo das Chemitek-Paket bleibt")
    first = await chat.read_until("Check wo das Chemitek-Paket bleibt")
    assert "<conversation_history>" not in first

    await asyncio.sleep(1.5)  # the session's TTL passes
    await chat.send("Soll Mittwoch kommen")
    second = await chat.read_until("Aktuelle Nachricht: Soll Mittwoch kommen")
    code, _, stderr = await chat.close()

    assert code == 0, stderr
    assert "Traceback" not in stderr
    block = second[second.index("<conversation_history>") :]
    assert block.startswith("<conversation_history>\nLetzte Gespräche mit dem User:\n\n[")
    assert "User: Check wo das Chemitek-Paket bleibt" in block
    assert "</conversation_history>\n\nAktuelle Zeit: " in block
    assert (tmp_path / "data" / "chatbridge.db").exists()


async def test_inside_the_ttl_the_session_just_continues(tmp_path: Path) -> None:
    chat = await ChatSession.start("--quiet", cwd=tmp_path)
    await chat.send("Check wo das Chemitek-Paket bleibt")
    await chat.read_until("Check wo das Chemitek-Paket bleibt")
    await chat.send("Soll Mittwoch kommen")
    await chat.read_until("Soll Mittwoch kommen")
    code, _, _ = await chat.close()
    assert code == 0
    assert "<conversation_history>" not in chat.transcript
    assert not chat.transcript.startswith("chatbridge chat")


async def test_ctrl_c_ends_chat_at_once_without_a_traceback(tmp_path: Path) -> None:
    chat = await ChatSession.start("--quiet", cwd=tmp_path)
    await chat.send("Hallo")
    await chat.read_until("Hallo")
    chat.process.send_signal(signal.SIGINT)  # stdin stays open, as at a terminal
    _, stderr = await asyncio.wait_for(chat.process.communicate(), 5)
    assert chat.process.returncode == 0
    assert "Traceback" not in stderr.decode()
