"""SIGKILL `chatbridge run` on Slack again and again while users write (issue 17.8).

HTTP Events API mode: `_EventPush` plays Slack's part and POSTs each event to
`/slack/events` until it gets a 200 (refused while the process is dead, cut by
a kill), as Slack retries an event it has no ack for. Users write DMs (answered
at the DM's top level with chat.postMessage and edits) and mentions (answered
in the mention's thread with a native stream). Half the kills wait until an
answer is on screen half done; with CHATBRIDGE_KILL_AT=first the kill comes
as soon as an answer's first message exists, right in the window between
Slack taking a message and the store recording its `ts`.

Counted honestly after the last restart: every bot message beyond one per
user message is extra (partial ones included, no allowance), a complete
answer shown twice is a duplicate, a message never answered is lost, and
every answer shown must be in memory. Looking before posting again (the
restarted process adopts a message an earlier one posted unrecorded) is what
keeps the extra count at 0. `CHATBRIDGE_SLACK_KILLS=30` runs a longer series.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chatbridge.platforms.slack import EVENTS_PATH
from tests.scenarios.test_chemitek_slack import wait_ready
from tests.support import fake_slack_events as ev
from tests.support import inbox_file
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.run_config import run_config_text
from tests.support.sse import Body, Reply

pytestmark = [pytest.mark.slow, pytest.mark.long]

KILLS = int(os.environ.get("CHATBRIDGE_SLACK_KILLS", "6"))
KILL_AT = os.environ.get("CHATBRIDGE_KILL_AT", "edited")
SECRET = "slack-kill-loop-signing-secret"
USERS = {"U0KILLA": "D0KILLA", "U0KILLB": "D0KILLB", "U0KILLC": "D0KILLC"}
PAD = " - the Chemitek parcel leaves on Wednesday."


def _answer_for(marker: str) -> str:
    return f"answer to {marker}{PAD}"


def _reply(body: Body) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content)
    marker = str(content).strip().rsplit("[", 1)[-1]
    return _answer_for("[" + marker.split("]", 1)[0] + "]")


def _config(slack: FakeSlack, openai: FakeOpenAI, db: Path, port: int) -> str:
    return run_config_text(
        port=port,
        openai=openai.base_url,
        allow=[f"slack:{u}" for u in USERS],
        engine={"shutdown_grace": "5s"},
        platforms={
            "slack": {
                "enabled": True,
                "bot_token": BOT_TOKEN,
                "signing_secret": SECRET,
                "base_url": slack.base_url,
                "edit_interval": "0.1s",
            }
        },
        memory={"backend": "sqlite", "path": str(db), "max_entries": 10000, "max_age": "1d"},
    )


class _EventPush:
    """Slack's side of HTTP mode: every event is POSTed until it got a 200."""

    def __init__(self, slack: FakeSlack, url: str) -> None:
        self._slack, self._url = slack, url
        self.queue: list[tuple[dict[str, Any], str]] = []
        self.retries = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _EventPush:
        self._task = asyncio.create_task(self._run(), name="slack event pushes")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    def send(self, event: dict[str, Any]) -> None:
        payload = self._slack.event_payload(event)  # the transcript holds it from now on
        self.queue.append((event, payload["event_id"]))
        self._wake.set()

    async def _run(self) -> None:
        attempts = 0
        while True:
            if not self.queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            event, event_id = self.queue[0]
            try:
                status, _, _ = await asyncio.wait_for(
                    self._slack.post_event(
                        self._url, event, signing_secret=SECRET, event_id=event_id,
                        retry_num=attempts or None,
                    ),
                    5.0,
                )  # fmt: skip
            except (aiohttp.ClientError, OSError, TimeoutError):
                status = 0
            if status == 200:
                self.queue.pop(0)
                attempts = 0
            else:
                attempts += 1
                self.retries += 1
                await asyncio.sleep(0.05)


def _bot_messages(slack: FakeSlack) -> list[ev.StoredMessage]:
    channels = [*USERS.values(), ev.CHANNEL]
    return [m for c in channels for m in slack.messages(c) if m.from_bot]


def _partial(text: str, expected: set[str]) -> bool:
    text = text.strip()
    return bool(text) and any(a.startswith(text) and a != text for a in expected)


async def _until_half_shown(slack: FakeSlack, expected: set[str], old: set[str]) -> bool:
    """Until some answer shows partly (edited or streamed on, unless KILL_AT=first)."""

    def half_shown() -> set[str]:
        return {
            m.ts
            for m in _bot_messages(slack)
            if _partial(m.text, expected)
            and (KILL_AT == "first" or m.edits or m.appends)
            and m.ts not in old
        }

    try:
        await slack.wait_for(lambda: bool(half_shown()), within=15)
    except AssertionError:
        return False
    return True


async def _start(tmp_path: Path, port: int, n: int) -> asyncio.subprocess.Process:
    with (tmp_path / f"run-{n}.log").open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env(),
            stdout=asyncio.subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    await wait_ready(port, within=60)
    return process


async def _memory(tmp_path: Path, user: str) -> str:
    shown = await run_cli("memory", "show", "--user", f"slack:{user}", cwd=tmp_path)
    assert shown.code == 0, shown.stderr
    return shown.stdout


@pytest.mark.timeout(120 + KILLS * 15)
async def test_sigkill_series_on_slack_leaves_no_duplicate_and_no_extra_message(
    tmp_path: Path,
) -> None:
    rng = random.Random(int(os.environ.get("CHATBRIDGE_KILL_SEED", "20261202")))
    port = free_port()
    db = tmp_path / "chatbridge.db"
    written: dict[str, list[str]] = {u: [] for u in USERS}
    expected: set[str] = set()
    half_shown_at_kill: set[str] = set()
    mid_stream = 0
    started = time.monotonic()
    async with FakeSlack() as slack, FakeOpenAI() as openai:
        openai.script(*[Reply(text=_reply, chunk_chars=8, chunk_delay=0.06)] * (KILLS * 40 + 100))
        (tmp_path / "chatbridge.yaml").write_text(_config(slack, openai, db, port))
        async with _EventPush(slack, f"http://127.0.0.1:{port}{EVENTS_PATH}") as push:
            n = 0
            for k in range(KILLS):
                process = await _start(tmp_path, port, k)
                for user, dm in USERS.items():
                    n += 1
                    written[user].append(marker := f"[dm-{n}]")
                    expected.add(_answer_for(marker))
                    push.send(ev.dm_message(marker, user=user, channel=dm))
                n += 1
                first = next(iter(USERS))
                written[first].append(marker := f"[mention-{n}]")
                expected.add(_answer_for(marker))
                push.send(ev.app_mention(marker, user=first))
                if k % 2 == 0:
                    await _until_half_shown(slack, expected, half_shown_at_kill)
                else:
                    await asyncio.sleep(rng.uniform(0.05, 1.0))
                process.kill()
                await process.wait()
                partly = {m.ts for m in _bot_messages(slack) if _partial(m.text, expected)}
                mid_stream += bool(partly - half_shown_at_kill)
                half_shown_at_kill |= partly

            process = await _start(tmp_path, port, KILLS)
            shown = lambda: [m.text for m in _bot_messages(slack)]  # noqa: E731
            try:
                await slack.wait_for(
                    lambda: expected <= set(shown()) and not push.queue
                    and inbox_file.pending(db) == 0,
                    within=60 + KILLS * 3,
                )  # fmt: skip
            except AssertionError:
                pass  # counted below
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)
            retries = push.retries
        texts = shown()
        edited_after_kill = [m for m in _bot_messages(slack) if m.ts in half_shown_at_kill]
    memories = {u: await _memory(tmp_path, u) for u in USERS}

    total = sum(len(v) for v in written.values())
    unanswered = [a for a in expected if a not in texts]
    duplicates = [a for a in expected if texts.count(a) > 1]
    extra = len(texts) - total
    partials = [t for t in texts if _partial(t, expected)]
    completed_by_edit = [m for m in edited_after_kill if m.text in expected]
    missing = [m for u, ms in written.items() for m in ms if m not in memories[u]]
    lookups = sum(
        len(slack.calls_to(m)) for m in ("conversations.history", "conversations.replies")
    )
    print(
        f"\nslack kill series: kills={KILLS} kill_at={KILL_AT} mid_stream={mid_stream} "
        f"messages={total} unanswered={len(unanswered)} duplicates={len(duplicates)} "
        f"extra_bot_messages={extra} partials_left={len(partials)} "
        f"completed_by_edit={len(completed_by_edit)} lookups={lookups} "
        f"missing_from_memory={len(missing)} event_retries={retries} "
        f"wall={time.monotonic() - started:.1f}s"
    )
    assert process.returncode == 0, (tmp_path / f"run-{KILLS}.log").read_text()
    assert unanswered == [], unanswered
    assert duplicates == [], duplicates
    assert partials == [], partials
    assert extra == 0, json.dumps(texts, indent=1)
    assert missing == [], missing
    assert mid_stream, "no kill met an answer half shown"
    assert completed_by_edit, "no answer cut by a kill was finished by editing it"
