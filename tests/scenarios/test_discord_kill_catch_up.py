"""Issue 17.1: SIGKILL `chatbridge run` on Discord again and again while users write.

Discord redelivers nothing, so what users write while the process is dead
only comes back through the catch-up (the channel history after each
channel's cursor). The fake Discord keeps every message; while the process
is dead, messages are only stored there (no gateway session exists to
deliver them), as on Discord. Each round: start, users write live (a DM, a
mention), a kill at a random moment (mid-stream, mid-catch-up), then users
write while it is dead: DMs, mentions, replies to the bot, follow-ups in the
bot's thread, and channel chatter.

The first half of the rounds runs with the fake's clock 30 minutes behind,
so what is written then is older than `engine.redeliver_within` (15 min)
when the next process reads it; the second half runs on real time.
Expected after the last restart: every message written while dead in the
first half got exactly one notice and no answer, every later one exactly one
answer and no notice, what was written live got exactly one of the two (an
answer when the inbox took it live; a notice when the kill came first and the
catch-up found it, old by then), chatter nothing, and nothing is answered
twice. `CHATBRIDGE_DISCORD_KILLS=30` runs a longer series.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_discord import CHANNEL_ID, THREAD_ID, USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.run_config import run_config_text
from tests.support.sse import Body, Reply

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("CHATBRIDGE_DISCORD_KILLS", "6"))
OTHER = 1000000000000000003  # a second DM user
_MARKER = re.compile(r"\[[a-z0-9-]+\]")


def _answer_for(marker: str) -> str:
    return f"answer to {marker} - the parcel leaves on Wednesday."


def _reply(body: Body) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    return _answer_for(_MARKER.findall(str(content))[-1])


def _config(fake: FakeDiscord, openai: FakeOpenAI, db: Path, port: int) -> str:
    return run_config_text(
        port=port,
        openai=openai.base_url,
        allow=(f"discord:{USER_ID}", f"discord:{OTHER}"),
        platforms={
            "discord": {
                "enabled": True,
                "token": fake.token,
                "api_base": fake.api_base,
                "gateway_url": fake.gateway_url,
                "edit_interval": "0.1s",
            }
        },
        memory={"backend": "sqlite", "path": str(db), "max_entries": 10000, "max_age": "1d"},
        engine={"shutdown_grace": "5s"},
    )


async def _start(tmp_path: Path, fake: FakeDiscord) -> asyncio.subprocess.Process:
    """A `chatbridge run` that has identified; its log goes to `run-N.log` (a pipe
    nobody reads could fill up and stall it)."""
    identified = fake.identify_count
    log = _log_path(tmp_path, identified)
    with log.open("wb") as err:  # the child keeps its own copy of the descriptor
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env(),
            stdout=asyncio.subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (fake.identify_count > identified and fake.connected):
        if process.returncode is not None:
            raise AssertionError(f"chatbridge run exited early with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError("chatbridge run never identified")
        await asyncio.sleep(0.02)
    return process


def _log_path(tmp_path: Path, n: int) -> Path:
    return tmp_path / f"run-{n}.log"


class _Users:
    """What users wrote, by what the bot owes them."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.n = 0
        self.old: list[str] = []  # written while dead, older than redeliver_within when read
        self.young: list[str] = []  # written while dead, fresh when read
        self.live: list[str] = []  # dispatched live: an answer or (killed first) a notice
        self.chatter: list[str] = []

    def marker(self, kind: str) -> str:
        self.n += 1
        return f"[{kind}-{self.n}]"

    async def write_live(self) -> None:
        for author in (USER_ID, OTHER):
            text = self.marker("live-dm")
            self.live.append(text)
            await self.fake.send_dm(text, author=author)
        text = self.marker("live-mention")
        self.live.append(text)
        await self.fake.send_guild_message(text, mention_bot=True)

    def write_while_dead(self, *, old: bool) -> None:
        """Only stored in the fake: no session exists to deliver them."""
        owed = self.old if old else self.young
        fake = self.fake
        for author in (USER_ID, OTHER):
            owed.append(text := self.marker("dm"))
            fake.user_message(fake.dm_channel(author), text, author=author)
        owed.append(text := self.marker("mention"))
        fake.user_message(CHANNEL_ID, text, mention_bot=True)
        mine = fake.bot_messages(CHANNEL_ID)
        if mine:
            owed.append(text := self.marker("reply"))
            fake.user_message(CHANNEL_ID, text, reply_to=mine[-1].id)
        owed.append(text := self.marker("thread"))
        fake.user_message(THREAD_ID, text)  # the bot answered in this thread before
        self.chatter.append(text := self.marker("chatter"))
        fake.user_message(CHANNEL_ID, text)


def _responses(fake: FakeDiscord, marker: str) -> tuple[int, int]:
    """(complete answers, notices) the bot shows for `marker` now."""
    texts = fake.bot_texts()
    answers = sum(t == _answer_for(marker) for t in texts)
    notices = sum("ich war offline" in t and f"„{marker}“" in t for t in texts)
    return answers, notices


def _settled(fake: FakeDiscord, users: _Users) -> bool:
    return (
        all(_responses(fake, t)[1] >= 1 for t in users.old)
        and all(_responses(fake, t)[0] >= 1 for t in users.young)
        and all(sum(_responses(fake, t)) >= 1 for t in users.live)
    )


@pytest.mark.timeout(120 + KILLS * 15)
async def test_sigkill_series_answers_what_was_written_while_dead_exactly_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(int(os.environ.get("CHATBRIDGE_KILL_SEED", "20261201")))
    async with FakeDiscord() as fake, FakeOpenAI() as openai:
        openai.script(*[Reply(text=_reply, chunk_chars=8, chunk_delay=0.03)] * (KILLS * 40 + 100))
        port = free_port()
        config = _config(fake, openai, tmp_path / "chatbridge.db", port)
        (tmp_path / "chatbridge.yaml").write_text(config)
        users = _Users(fake)
        fake.clock = lambda: time.time() - 1800  # the first half: 30 minutes in the past

        process = await _start(tmp_path, fake)  # a first life that knows the thread
        await fake.send_thread_message(f"<@{fake.me['id']}> [thread-start]")
        users.live.append("[thread-start]")
        await fake.wait_for(lambda: sum(_responses(fake, "[thread-start]")) == 1, within=30)
        for round_ in range(KILLS):
            if round_:
                process = await _start(tmp_path, fake)
            if round_ == KILLS // 2:
                fake.clock = time.time  # the second half: written now
            await users.write_live()
            await asyncio.sleep(rng.uniform(0.05, 1.0))
            process.kill()
            await process.wait()
            users.write_while_dead(old=round_ < KILLS // 2)

        last_log = _log_path(tmp_path, fake.identify_count)
        process = await _start(tmp_path, fake)
        try:
            await fake.wait_for(lambda: _settled(fake, users), within=60 + KILLS * 3)
        except AssertionError:
            pass  # counted below
        process.send_signal(signal.SIGTERM)  # drains: a late duplicate would be out by now
        await asyncio.wait_for(process.wait(), 30)
        err = last_log.read_bytes()

        expected = {_answer_for(t) for t in users.live + users.young + users.old}
        texts = fake.bot_texts()
    summary = {
        "old": [t for t in users.old if _responses(fake, t) != (0, 1)],
        "young": [t for t in users.young if _responses(fake, t) != (1, 0)],
        "live": [t for t in users.live if sum(_responses(fake, t)) != 1],
        "chatter": [t for t in users.chatter if any(t in m for m in texts)],
    }
    partials = [m for m in texts if any(a.startswith(m) and a != m for a in expected)]
    # One bot message (an answer or a notice) per message owed one; every other
    # bot message is extra, partial ones included (no allowance).
    owed = len(users.old) + len(users.young) + len(users.live)
    extra = len(texts) - owed
    duplicates = [a for a in expected if texts.count(a) > 1]
    print(
        f"\ndiscord kill series: kills={KILLS} written_while_dead="
        f"{len(users.old) + len(users.young)} (old={len(users.old)}) live={len(users.live)} "
        f"chatter={len(users.chatter)} wrong={sum(len(v) for v in summary.values())} "
        f"duplicates={len(duplicates)} partials_left={len(partials)} "
        f"extra_bot_messages={extra} bot_messages={len(texts)}"
    )
    assert process.returncode == 0, err.decode(errors="replace")
    assert summary == {"old": [], "young": [], "live": [], "chatter": []}, summary
    assert duplicates == [], duplicates
    assert partials == [], partials
    assert extra == 0, texts
