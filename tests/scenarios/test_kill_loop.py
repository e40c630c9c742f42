"""Crash safety of `chatbridge run`: SIGKILL it again and again while users write.

The durable inbox promises: every update is stored before the polling offset
moves past it, an answer is recorded before final delivery and committed with
its ring entry, and pending entries are answered after a restart. This loop
checks the three figures that promise is about — unanswered messages,
duplicate answers and answers seen but not stored — against the real process.
`CHATBRIDGE_KILLS=100 python -m pytest tests/scenarios/test_kill_loop.py -s`
runs the long version; see RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.support import tally
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Body, Reply

pytestmark = pytest.mark.slow

USERS = (579304651, 579304652, 579304653)
KILLS = int(os.environ.get("CHATBRIDGE_KILLS", "10"))
PAD = " - the Chemitek parcel leaves on Wednesday."


def _answer_for(text: str) -> str:
    return f"answer to {text}{PAD}"


def _reply(body: Body) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content)
    return _answer_for(str(content).strip())


def _config(telegram: FakeTelegram, openai: FakeOpenAI, db: Path, grace: str) -> str:
    allow = ", ".join(f"telegram:{u}" for u in USERS)
    return f"""
engine:
  shutdown_grace: {grace}
providers:
  main:
    type: openai
    model: gpt-test
    api_key: sk-test
    base_url: {openai.base_url}
platforms:
  telegram:
    enabled: true
    base_url: {telegram.base_url}
    edit_interval: 0.1s
memory:
  backend: sqlite
  path: {db}
  max_entries: 10000
  max_age: 1d
access:
  allow: [{allow}]
server:
  port: {free_port()}
"""


async def _start(tmp_path: Path, telegram: FakeTelegram) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _until_polling(telegram: FakeTelegram, process: asyncio.subprocess.Process) -> None:
    """Wait until this process has asked for updates (it is up)."""
    seen = len(telegram.calls_to("getUpdates"))
    deadline = time.monotonic() + 30
    while len(telegram.calls_to("getUpdates")) <= seen:
        if process.returncode is not None:
            raise AssertionError(f"chatbridge run exited early with {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError("chatbridge run never polled")
        await asyncio.sleep(0.02)


async def _stop(process: asyncio.subprocess.Process) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, err.decode(errors="replace")


def _bot_messages(telegram: FakeTelegram, chat: int) -> list[str]:
    """Bot messages (not edits) in the chat, in their current text."""
    return telegram.bot_texts(chat)


def _all_answered(telegram: FakeTelegram, sent: dict[int, list[str]]) -> bool:
    for chat, texts in sent.items():
        shown = set(_bot_messages(telegram, chat))
        if any(_answer_for(t) not in shown for t in texts):
            return False
    return True


async def _memory(tmp_path: Path, user: int) -> str:
    show = await run_cli(
        "memory", "show", "--user", f"telegram:{user}", cwd=tmp_path,
        env={"TELEGRAM_BOT_TOKEN": "x"},
    )  # fmt: skip
    assert show.code == 0, show.stderr
    return show.stdout


@pytest.mark.timeout(60 + KILLS * 5)  # the suite's 60 s cap would stop the long version
async def test_sigkill_loop_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    kills = KILLS
    rng = random.Random(int(os.environ.get("CHATBRIDGE_KILL_SEED", "20240611")))
    sent: dict[int, list[str]] = {u: [] for u in USERS}
    started = time.monotonic()
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        # Every request (first tries and retries after a kill) gets the same
        # deterministic, slowly streamed answer, so kills land mid-stream.
        openai.script(*[Reply(text=_reply, chunk_chars=8, chunk_delay=0.04)] * (kills * 50 + 200))
        config = _config(telegram, openai, tmp_path / "chatbridge.db", "5s")
        (tmp_path / "chatbridge.yaml").write_text(config)
        n = 0
        for _ in range(kills):
            process = await _start(tmp_path, telegram)
            await _until_polling(telegram, process)
            for user in USERS:
                n += 1
                text = f"[u{user % 1000}-m{n}]"  # bracketed: no id is a prefix of another
                sent[user].append(text)
                telegram.push_text(user, user, text)
            await asyncio.sleep(rng.uniform(0.05, 1.0))
            process.kill()
            await process.wait()
        process = await _start(tmp_path, telegram)
        await _until_polling(telegram, process)  # SIGTERM before start-up is a plain kill
        try:
            await telegram.wait_for(lambda: _all_answered(telegram, sent), within=60 + kills)
            await asyncio.sleep(0.5)  # a late duplicate would show by now
        except AssertionError:
            pass  # counted below
        code, err = await _stop(process)
        transcripts = {u: _bot_messages(telegram, u) for u in USERS}
    memories = {u: await _memory(tmp_path, u) for u in USERS}

    expected = {u: {_answer_for(t) for t in ts} for u, ts in sent.items()}
    total = sum(len(t) for t in sent.values())
    unanswered = [t for u, ts in sent.items() for t in ts if _answer_for(t) not in transcripts[u]]
    duplicates = [
        (u, a) for u, shown in transcripts.items() for a in set(shown) if shown.count(a) > 1
    ]
    extra = {u: len(shown) - len(sent[u]) for u, shown in transcripts.items()}
    seen_not_stored = [
        t for u, ts in sent.items() for t in ts
        if _answer_for(t) in transcripts[u] and t not in memories[u]
    ]  # fmt: skip
    print(
        f"\nkill loop: kills={kills} messages={total} unanswered={len(unanswered)} "
        f"duplicates={len(duplicates)} extra_bot_messages={sum(max(0, e) for e in extra.values())} "
        f"missing_from_memory={len(seen_not_stored)} "
        f"provider_requests={len(openai.requests)} wall={time.monotonic() - started:.1f}s"
    )
    tally.record_kill_loop(
        kills=kills, messages=total, unanswered=len(unanswered), duplicates=len(duplicates),
        extra=sum(max(0, e) for e in extra.values()), missing=len(seen_not_stored),
    )  # fmt: skip
    assert code == 0, err
    assert unanswered == [], f"never answered: {unanswered}"
    assert duplicates == [], f"answered twice: {duplicates}"
    assert all(e <= 0 for e in extra.values()), (
        f"more bot messages than user messages: {extra}; unexpected: "
        f"{[(u, m) for u, ms in transcripts.items() for m in ms if m not in expected[u]]}"
    )
    assert seen_not_stored == [], f"answers seen but not in memory: {seen_not_stored}"


async def test_sigterm_with_queued_messages_then_restart_answers_each_once(
    tmp_path: Path,
) -> None:
    user = USERS[0]
    texts = [f"queued-{i}" for i in range(1, 5)]
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(*[Reply(text=_reply, chunk_chars=6, chunk_delay=0.15)] * 40)
        config = _config(telegram, openai, tmp_path / "chatbridge.db", "1s")
        (tmp_path / "chatbridge.yaml").write_text(config)
        process = await _start(tmp_path, telegram)
        await _until_polling(telegram, process)
        for text in texts:
            telegram.push_text(user, user, text)
        await telegram.wait_for(lambda: openai.open_streams == 1, within=30)
        stopped = time.monotonic()
        code, err = await _stop(process)
        stop_seconds = time.monotonic() - stopped
        before = _bot_messages(telegram, user)
        assert code == 0, err
        assert stop_seconds < 10, f"SIGTERM took {stop_seconds:.1f}s with a 1s grace"

        process = await _start(tmp_path, telegram)
        await _until_polling(telegram, process)
        try:
            await telegram.wait_for(lambda: _all_answered(telegram, {user: texts}), within=60)
            await asyncio.sleep(0.5)
        finally:
            code, err = await _stop(process)
        shown = _bot_messages(telegram, user)
    print(f"\nsigterm: before restart {before!r}\nafter restart {shown!r}")
    assert code == 0, err
    assert sorted(shown) == sorted(_answer_for(t) for t in texts), shown
    memory = await _memory(tmp_path, user)
    assert all(t in memory for t in texts), memory
