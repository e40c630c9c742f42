"""Images through `chatbridge run`: peak memory and the time one image adds.

    python -m tests.bench.bench_media [rounds] [--mb 10]

The real `chatbridge run` (a child process) serves Telegram against the fake
Bot API and answers with the openai SDK against the fake OpenAI; the fakes
run in this process, so the child's memory is chatbridge's alone.

1. Memory: after a warm-up answer, the child's resident set (`VmRSS`) is the
   idle figure; its peak (`VmHWM`) is reset (`/proc/PID/clear_refs` = 5) and
   one photo of `--mb` MB (PNG signature, random bytes) is answered; the new
   peak minus idle is what handling the image cost, printed as a multiple of
   the image's size.
2. Time: each round is a text message, a photo with the same caption (each
   from a new user, so no image stays in a live session), both timed from the
   update being queued to the answer's `sendMessage` reaching the fake (its
   own timestamp, not when this loop next looks), and then the floor: what a
   Telegram image inherently costs to fetch, done plainly one step after the
   other in this process: `getFile` (python-telegram-bot, as the child calls
   it), the download of the same size (the fake's `/file/bot…` URL through
   chatbridge's capped `Downloader`) and `base64.b64encode`. Rounds interleave
   (text, photo, floor; text, photo, floor; …) so load changes hit all three.
   The difference of the first two medians is what an image adds; the image
   also travels to the model (13.3 MB of JSON over loopback, received and
   parsed by the fake in this process), and that share, the fake's handler
   time for a photo request less that for a text request, is taken off. The
   same comparison is also made round by round (paired), which load that
   changes between rounds disturbs less.

   Each message is queued only once chatbridge's bot-wide Telegram budget
   (`TelegramPacer`: 25 calls a second, bursts of 5) is full again. Each answer
   spends two (typing, sendMessage); back-to-back rounds of a small image come
   at about 40 calls a second, so the pacer rightly held the answers, the
   photo's most (it follows the text at once, while the text follows the
   floor), a wait for the bench's rate, not for the image.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from telegram import Bot

from chatbridge.platforms._download import Downloader
from chatbridge.platforms.telegram._files import file_base_url
from chatbridge.platforms.telegram._pacing import BOT_BURST, BOT_RATE
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.media import PNG_HEAD
from tests.support.run_config import write_run_config


def status(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def image(mb: float, seed: int) -> bytes:
    size = int(mb * 1024 * 1024)
    return PNG_HEAD + os.urandom(size - len(PNG_HEAD) - 1) + bytes([seed % 256])


REFILL = BOT_BURST / BOT_RATE  # seconds for the bot's budget to refill from empty


async def rested(telegram: FakeTelegram) -> None:
    """Returns once the child's bot-wide budget is full: `REFILL` seconds
    after its last call to a chat (every such call spends from it)."""
    paced = [call.at for call in telegram.calls if "chat_id" in call.params]
    if paced:
        await asyncio.sleep(max(0.0, paced[-1] + REFILL - time.monotonic()))


async def answered(telegram: FakeTelegram, chat: int, push: object) -> float:
    """Seconds from queuing the update (`push`) to the answer's sendMessage
    reaching the fake, by the fake's own clock (`Call.at`, monotonic)."""
    assert callable(push)
    await rested(telegram)
    started = time.monotonic()
    push()
    await telegram.wait_for(lambda: bool(telegram.bot_texts(chat)), within=120)
    sent = next(
        call.at
        for call in telegram.calls
        if call.method == "sendMessage" and str(call.params.get("chat_id")) == str(chat)
    )
    return sent - started


class Floor:
    """getFile, download, base64 of one photo, one after the other, in a
    process of its own (`--floor`), as the child fetches across processes."""

    def __init__(self, telegram: FakeTelegram) -> None:
        self._telegram = telegram
        self._process: asyncio.subprocess.Process | None = None
        self.steps: list[tuple[float, float, float]] = []

    async def __aenter__(self) -> Floor:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.bench.bench_media", "--floor",
            self._telegram.base_url, self._telegram.token,
            env=clean_env(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return self

    async def __aexit__(self, *_: object) -> None:
        process = self._process
        assert process is not None
        assert process.stdin is not None
        process.stdin.close()
        await process.wait()

    async def once(self, data: bytes, n: int) -> None:
        process = self._process
        assert process is not None
        assert process.stdin is not None
        assert process.stdout is not None
        file_id = self._telegram.add_file(data, path=f"photos/floor{n}.jpg")
        process.stdin.write(f"{file_id} {len(data)}\n".encode())
        line = await asyncio.wait_for(process.stdout.readline(), 120)
        get_file, download, encode = (float(x) for x in line.split())
        self.steps.append((get_file, download, encode))


async def fetch_floor(base_url: str, token: str) -> None:
    """The `--floor` process: for each `file_id size` line, getFile through
    python-telegram-bot, the download through chatbridge's `Downloader`, then
    `base64.b64encode`; prints the three durations."""
    bot = Bot(token, base_url=base_url, base_file_url=file_base_url(base_url))
    await bot.initialize()
    downloader = Downloader("bench")
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            file_id, size = line.split()
            started = time.perf_counter()
            file = await bot.get_file(file_id)
            fetched = time.perf_counter()
            assert file.file_path
            body = await downloader.get(file.file_path, limit=int(size))
            downloaded = time.perf_counter()
            encoded = base64.b64encode(body)
            done = time.perf_counter()
            assert len(encoded) > len(body)
            del body, encoded
            print(f"{fetched - started} {downloaded - fetched} {done - downloaded}", flush=True)
    finally:
        await downloader.aclose()
        await bot.shutdown()


async def main(rounds: int, mb: float) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; image {mb:g} MB; "
          f"each message queued {REFILL:g} s after the bot's last call to a chat")  # fmt: skip
    async with FakeTelegram() as telegram, FakeOpenAI() as openai, Floor(telegram) as floor:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            config = write_run_config(
                workdir,
                port=free_port(),
                telegram=telegram.base_url,
                openai=openai.base_url,
                allow=range(1001, 1100),
                platforms={"telegram": {"token": telegram.token, "drafts": False}},
                memory={"path": str(workdir / "bench.db")},
                media={"max_file_bytes": "64MB"},
            )
            child = await asyncio.create_subprocess_exec(
                *CHATBRIDGE, "run", "--config", str(config), cwd=workdir, env=clean_env(),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                chat = 1000
                for _ in range(2):  # warm-up: SDK imported, connections open
                    chat += 1
                    await answered(telegram, chat, lambda c=chat: telegram.push_text(c, c, "Hi"))
                idle = status(child.pid, "VmRSS")
                reset = reset_peak(child.pid)
                data = image(mb, 0)
                photo = telegram.add_file(data, path="photos/p0.jpg")
                chat += 1
                await answered(telegram, chat, lambda c=chat: telegram.push_media(
                    c, c, caption="Was steht da?", photo=[photo]))  # fmt: skip
                peak = status(child.pid, "VmHWM")
                after = status(child.pid, "VmRSS")
                text_times, image_times, text_server, image_server = [], [], [], []
                for n in range(rounds):
                    chat += 1
                    text_times.append(await answered(
                        telegram, chat,
                        lambda c=chat: telegram.push_text(c, c, "Was steht da?")))  # fmt: skip
                    text_server.append(openai.requests[-1].server_seconds)
                    photo = telegram.add_file(image(mb, n + 1), path=f"photos/p{n + 1}.jpg")
                    chat += 1
                    image_times.append(await answered(
                        telegram, chat, lambda c=chat, p=photo: telegram.push_media(
                            c, c, caption="Was steht da?", photo=[p])))  # fmt: skip
                    image_server.append(openai.requests[-1].server_seconds)
                    await floor.once(image(mb, 100 + n), n)
            finally:
                child.terminate()
                await child.wait()
    size = len(data)
    print()
    print("| figure | value |")
    print("|---|---:|")
    print(f"| image size | {size / 2**20:.1f} MB |")
    print(f"| idle RSS of `run` | {idle / 2**20:.1f} MB |")
    label = "peak RSS while handling it" + ("" if reset else " (VmHWM not resettable)")
    print(f"| {label} | {peak / 2**20:.1f} MB |")
    print(f"| peak above idle | {(peak - idle) / 2**20:.1f} MB = {(peak - idle) / size:.2f}x "
          "the image |")  # fmt: skip
    print(f"| RSS after the answer | {after / 2**20:.1f} MB |")
    print()
    print(f"| {rounds} rounds, median | s |")
    print("|---|---:|")
    text, photo_s = statistics.median(text_times), statistics.median(image_times)
    print(f"| text message, queued -> answered | {text:.3f} |")
    print(f"| photo + same caption, queued -> answered | {photo_s:.3f} |")
    print(f"| added by the image | {photo_s - text:.3f} |")
    fake = statistics.median(image_server) - statistics.median(text_server)
    print(f"| of which the fake OpenAI receiving and parsing the image (this process) | "
          f"{fake:.3f} |")  # fmt: skip
    print(f"| added by the image in `run` (the difference less the fake's share) | "
          f"{photo_s - text - fake:.3f} |")  # fmt: skip
    steps = floor.steps
    for i, what in enumerate(("getFile", "download", "base64")):
        print(f"| floor: {what} | {statistics.median(s[i] for s in steps):.3f} |")
    print(f"| **floor: getFile + download + base64, one after the other** | "
          f"{statistics.median(sum(s) for s in steps):.3f} |")  # fmt: skip
    # The same, round by round (each round's photo less its text, less the
    # fake's share, beside that round's floor): load that changes between
    # rounds moves both sides of one comparison alike.
    added = [
        (p - t) - (ps - ts)
        for p, t, ps, ts in zip(image_times, text_times, image_server, text_server, strict=True)
    ]
    floors = [sum(s) for s in steps]
    over = [a - f for a, f in zip(added, floors, strict=True)]
    within = sum(o <= 0 for o in over)
    print(f"| round by round: added by the image in `run`, median | "
          f"{statistics.median(added):.3f} |")  # fmt: skip
    print(f"| round by round: `run` minus the floor, median | "
          f"{statistics.median(over):+.3f} |")  # fmt: skip
    print(f"| rounds where the image added no more than that round's floor | "
          f"{within} of {rounds} |")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--floor"]:
        asyncio.run(fetch_floor(sys.argv[2], sys.argv[3]))
        sys.exit()
    parser = argparse.ArgumentParser()
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.mb))
