"""SIGHUP reload and `/readyz` through a real `chatbridge run`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE, BOB
from tests.support.run_config import run_config_text
from tests.support.sse import Body, Reply

pytestmark = pytest.mark.slow

# The denied reply as a user reads it (written out, not taken from core/texts.py).
DENIED = (
    "Sorry, you are not allowed to use this bot. Ask the admin to add "
    "telegram:{user} to access.allow in the chatbridge config."
)


def _config(
    telegram: FakeTelegram,
    openai: FakeOpenAI,
    port: int,
    prompt: str,
    *,
    allow: tuple[int, ...] = (ALICE,),
    identities: dict[str, list[str]] | None = None,
    edit_interval: str = "1s",
) -> str:
    return run_config_text(
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        allow=allow,
        bot={"system_prompt": prompt, "language": "en"},
        engine={"shutdown_grace": "5s"},
        platforms={"telegram": {"token": telegram.token, "edit_interval": edit_interval}},
        identities=identities or {},
    )


class _Run:
    """A `chatbridge run` whose stderr is read line by line as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, cwd: Path) -> _Run:
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=cwd, env=clean_env(),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            async with self._changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._changed.notify_all()

    def count(self, needle: str) -> int:
        return sum(needle in line for line in self.lines)

    async def reload(self, needle: str) -> str:
        """SIGHUP, then wait until one more log line holds `needle`; returns it."""
        seen = self.count(needle)
        self.process.send_signal(signal.SIGHUP)
        return await self.logged(needle, more_than=seen)

    async def logged(self, needle: str, *, more_than: int) -> str:
        """The last log line holding `needle`, once more than `more_than` do."""

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self.count(needle) > more_than)

        await asyncio.wait_for(wait(), 30)
        return [line for line in self.lines if needle in line][-1]

    async def stop(self) -> str:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.process.wait(), 30)
        await self._reader
        return "\n".join(self.lines)


async def _status(url: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status


async def _wait_status(url: str, wanted: int, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            if await _status(url) == wanted:
                return
        except aiohttp.ClientError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{url} never answered {wanted}")
        await asyncio.sleep(0.05)


async def _ask(telegram: FakeTelegram, openai: FakeOpenAI, text: str, user: int = ALICE) -> Body:
    """Send `text` as `user`; returns the body of the provider request it caused,
    once the answer is in the chat."""
    before, shown = len(openai.requests), len(telegram.bot_texts(user))
    telegram.push_text(user, user, text)
    await telegram.wait_for(lambda: len(openai.requests) > before, within=30)
    await telegram.wait_for(lambda: len(telegram.bot_texts(user)) > shown, within=30)
    return openai.requests[-1].body


def _system(body: Body) -> str:
    system = body["messages"][0]
    assert system["role"] == "system"
    return str(system["content"])


async def test_sighup_swaps_a_valid_config_and_keeps_the_old_one_on_errors(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "chatbridge.yaml"
    async with FakeTelegram() as telegram, FakeOpenAI(default_text="ok") as openai:
        config.write_text(_config(telegram, openai, port, "Prompt A"))
        run = await _Run.start(tmp_path)
        try:
            await _wait_status(f"http://127.0.0.1:{port}/readyz", 200)
            assert _system(await _ask(telegram, openai, "eins")) == "Prompt A"

            config.write_text(_config(telegram, openai, port, "Prompt B"))
            await run.reload("reloaded the config")
            assert _system(await _ask(telegram, openai, "zwei")) == "Prompt B"

            config.write_text(_config(telegram, openai, port, "Prompt C") + "bogus_key: 1\n")
            refused = await run.reload("reload refused")
            assert _system(await _ask(telegram, openai, "drei")) == "Prompt B", (
                "a broken file was applied"
            )
        finally:
            log = await run.stop()
    assert run.process.returncode == 0, log
    assert f"{config}:" in refused, "the refused reload named no FILE:LINE"
    assert "bogus_key" in refused
    assert run.count("reloaded the config") == 1
    assert "Traceback" not in log


async def test_sighup_applies_providers_access_and_identities_live_and_names_restart_keys(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "chatbridge.yaml"
    async with (
        FakeTelegram() as telegram,
        FakeOpenAI(default_text="from A") as first,
        FakeOpenAI(default_text="from B") as second,
    ):
        config.write_text(_config(telegram, first, port, "P", allow=(ALICE,)))
        run = await _Run.start(tmp_path)
        try:
            await _wait_status(f"http://127.0.0.1:{port}/readyz", 200)
            await _ask(telegram, first, "Wo ist das Chemitek-Paket?")
            telegram.push_text(BOB, BOB, "darf ich?")
            await telegram.wait_for(lambda: bool(telegram.bot_texts(BOB)), within=30)
            assert telegram.bot_texts(BOB) == [DENIED.format(user=BOB)]

            # Another provider, Bob allowed, Bob one person with Alice, and a key
            # (platforms.telegram.edit_interval) that needs a restart.
            config.write_text(
                _config(
                    telegram, second, port, "P", allow=(ALICE, BOB),
                    identities={"alice": [f"telegram:{ALICE}", f"telegram:{BOB}"]},
                    edit_interval="2s",
                )
            )  # fmt: skip
            reloads = run.count("reloaded the config")
            warning = await run.reload("applies after a restart")
            await run.logged("reloaded the config", more_than=reloads)
            await _ask(telegram, second, "Und wann kommt es?", user=BOB)
            assert telegram.bot_texts(BOB)[-1] == "from B"
            assert len(first.requests) == 1, "the old provider answered after the reload"
            # Bob is one person with Alice now: his exchange reaches her next session.
            telegram.push_text(ALICE, ALICE, "/new")
            await telegram.wait_for(lambda: len(telegram.bot_texts(ALICE)) == 2, within=30)
            body = await _ask(telegram, second, "Noch etwas?")
        finally:
            log = await run.stop()
    assert run.process.returncode == 0, log
    assert "Und wann kommt es?" in body["messages"][-1]["content"]
    assert "reload: platforms changed; that part applies after a restart" in warning
    assert "Traceback" not in log


async def test_an_answer_in_flight_keeps_the_config_it_started_with(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "chatbridge.yaml"
    slow = "Das Paket kommt am Mittwoch, sagt die Sendungsverfolgung von Chemitek."
    async with (
        FakeTelegram() as telegram,
        FakeOpenAI() as first,
        FakeOpenAI(default_text="from B") as second,
    ):
        first.script(Reply(text=slow, chunk_chars=4, chunk_delay=0.1))
        config.write_text(_config(telegram, first, port, "Prompt A", edit_interval="0.1s"))
        run = await _Run.start(tmp_path)
        try:
            await _wait_status(f"http://127.0.0.1:{port}/readyz", 200)
            telegram.push_text(ALICE, ALICE, "Wo ist das Paket?")
            # Reload while the first chunks are on screen (as a draft, in a
            # private chat) and the stream is open.
            await telegram.wait_for(
                lambda: first.open_streams == 1 and bool(telegram.drafts[ALICE]), within=30
            )
            config.write_text(_config(telegram, second, port, "Prompt B"))
            await run.reload("reloaded the config")
            still_streaming = first.open_streams == 1
            await telegram.wait_for(lambda: telegram.bot_texts(ALICE) == [slow], within=30)
            body = await _ask(telegram, second, "Danke!")
        finally:
            log = await run.stop()
    assert run.process.returncode == 0, log
    assert still_streaming, "the reload landed after the answer had finished"
    assert len(first.requests) == 1
    assert _system(first.requests[0].body) == "Prompt A"
    assert _system(body) == "Prompt B"
    assert len(second.requests) == 1


async def test_readyz_is_503_while_draining(tmp_path: Path) -> None:
    port = free_port()
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(Reply(text="langsam " * 40, chunk_chars=8, chunk_delay=0.05))
        (tmp_path / "chatbridge.yaml").write_text(_config(telegram, openai, port, "P"))
        run = await _Run.start(tmp_path)
        base = f"http://127.0.0.1:{port}"
        try:
            await _wait_status(f"{base}/readyz", 200)
            assert await _status(f"{base}/healthz") == 200
            telegram.push_text(ALICE, ALICE, "Hallo")
            await telegram.wait_for(lambda: openai.open_streams == 1, within=30)
            run.process.send_signal(signal.SIGTERM)
            await _wait_status(f"{base}/readyz", 503)
            assert await _status(f"{base}/healthz") == 200, "liveness must stay up while draining"
            assert openai.open_streams == 1, "the answer was over before draining was seen"
        finally:
            log = await run.stop()
    assert run.process.returncode == 0, log
