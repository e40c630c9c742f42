"""`chatbridge chat` killed while answering piped input: the lines of that
read were stored with the first one, so the restart answers each once.

The console writes every complete line of one read of stdin to the inbox in
one transaction before it answers the first (README, "Talk to it"). A line
is stored before the provider is asked about it; a console killed (SIGKILL)
while the model streams the first answer leaves all of them pending, and
the next `chatbridge chat` answers them, oldest first, each once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import inbox_file
from tests.support.cli import ChatSession, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import Body, Reply

pytestmark = pytest.mark.slow

LINES = ("Wo bleibt das Chemitek-Paket", "Soll Mittwoch kommen", "Und die Nachnahme")
STALL = 60.0  # s the first answer's first word waits: the kill comes long before


def _answer(body: Body) -> str:
    return f"Antwort auf «{body['messages'][-1]['content']}»"


async def test_lines_of_one_read_killed_mid_answer_are_each_answered_once_after_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "data" / "chatbridge.db"
    async with FakeOpenAI() as fake:
        fake.script(
            Reply(text=_answer, first_chunk_delay=STALL), *(Reply(text=_answer) for _ in LINES)
        )
        env = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": fake.base_url}
        chat = await ChatSession.start("--quiet", cwd=tmp_path, env=env)
        await chat.send("\n".join(LINES))  # one write, one read: one batch
        assert await fake.wait_streams(1), "the first line was never asked"
        chat.process.kill()
        await chat.process.wait()
        # Every line of the read was stored before the first was answered.
        assert inbox_file.pending(db) == len(LINES)

        restarted = await run_cli("chat", "--quiet", cwd=tmp_path, env=env)
        assert restarted.code == 0, restarted.stderr

    assert inbox_file.pending(db) == 0
    asked = [r.body["messages"][-1]["content"] for r in fake.requests]
    assert asked == [LINES[0], *LINES], "the killed one again, then each line once, in order"
    for line in LINES:
        assert restarted.stdout.count(f"Antwort auf «{line}»") == 1
