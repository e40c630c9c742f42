"""Start-up time: `chatbridge run` from process start to its first Telegram poll.

    python -m tests.bench.bench_startup [runs]

Runs the real console entry point (`python -m chatbridge run`) against the
fake Bot API and reports how long each run took until the fake saw the first
`getUpdates`, plus which heavy modules importing the engine loads.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_telegram import FakeTelegram

CONFIG = """
platforms:
  telegram: {{enabled: true, token: "{token}", base_url: "{base_url}"}}
memory: {{path: "{db}"}}
server: {{port: {port}}}
providers:
  main: {provider}
"""
PROVIDERS = {
    "debug": "{type: debug}",
    "openai": '{type: openai, model: gpt-test, api_key: sk-test, base_url: "http://127.0.0.1:9/v1"}',
}


async def one_run(fake: FakeTelegram, workdir: Path, provider: str) -> float:
    config = workdir / "chatbridge.yaml"
    config.write_text(
        CONFIG.format(
            token=fake.token,
            base_url=fake.base_url,
            db=workdir / "s.db",
            port=free_port(),
            provider=PROVIDERS[provider],
        )
    )
    polls_before = len(fake.calls_to("getUpdates"))
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", "--config", str(config), env=clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    await fake.wait_for(lambda: len(fake.calls_to("getUpdates")) > polls_before, within=30)
    elapsed = time.perf_counter() - started
    process.terminate()
    await process.wait()
    return elapsed


def engine_imports() -> list[str]:
    code = (
        "import sys, chatbridge.core.engine; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'redis','telegram','discord','slack_bolt','slack_sdk','openai','anthropic','yaml','pydantic'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


async def main(runs: int) -> None:
    print(f"chatbridge run -> first getUpdates, {runs} runs each:")
    for provider in PROVIDERS:
        async with FakeTelegram() as fake:
            with tempfile.TemporaryDirectory() as tmp:
                times = [await one_run(fake, Path(tmp), provider) for _ in range(runs)]
        print(
            f"  provider {provider:6}: median {statistics.median(times):.3f} s, "
            f"min {min(times):.3f} s, max {max(times):.3f} s"
        )
    print(f"  heavy modules loaded by importing the engine: {engine_imports() or 'none'}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
