"""`chatbridge chat` per message against the seed's own memory operation.

Run: `python3 -m tests.bench.bench_seed [--rounds 9] [--messages 100]`.

The reference is the seed's published algorithm, written here from its
description (not copied): a ring of at most 20 entries (newer than 24 h) kept
in a flat JSON file that is rewritten, indented, on every add; an entry keeps
the user message cut to 500 characters and the answer's leading lines up to
300; then the context block of the newest 5 entries is built. One "seed op"
is one add plus one context build, in this process.

chatbridge: `chatbridge chat` in a child process (debug provider, the
default SQLite store in a fresh directory, stdin piped), once with
`--messages` lines and once with 10 more times that many; its CPU time
(user + system, from `resource.getrusage(RUSAGE_CHILDREN)`) and wall time
for the difference, divided by the difference in lines, is its cost per
message with start-up taken out. Rounds alternate the two, so both meet the
same machine; medians are printed, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from tests.support.cli import CHATBRIDGE, clean_env

RING, MAX_AGE, USER_CHARS, SUMMARY_CHARS, CONTEXT = 20, 24 * 3600, 500, 300, 5


@dataclass
class SeedEntry:
    timestamp: float
    user_message: str
    assistant_summary: str
    session_name: str
    workdir: str


class SeedRing:
    """The seed's memory, as its article describes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[SeedEntry] = []
        if path.exists():
            self.entries = [SeedEntry(**e) for e in json.loads(path.read_text())]

    def add(self, user: str, answer: str, session: str, workdir: str) -> None:
        summary_lines: list[str] = []
        used = 0
        for line in answer.strip().split("\n"):
            if used + len(line) > SUMMARY_CHARS:
                break
            summary_lines.append(line)
            used += len(line) + 1
        entry = SeedEntry(
            time.time(), user[:USER_CHARS], "\n".join(summary_lines), session, workdir
        )
        cutoff = time.time() - MAX_AGE
        self.entries = [e for e in [*self.entries, entry] if e.timestamp > cutoff][-RING:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps([asdict(e) for e in self.entries], indent=2, ensure_ascii=False)
        self.path.write_text(body)

    def context(self) -> str:
        recent = self.entries[-CONTEXT:]
        if not recent:
            return ""
        lines = ["<conversation_history>", "Letzte Gespräche mit dem User:"]
        for e in recent:
            stamp = datetime.fromtimestamp(e.timestamp).strftime("%d.%m. %H:%M")
            lines += [f"\n[{stamp}]", f"User: {e.user_message}", f"Bot: {e.assistant_summary}"]
        lines.append("</conversation_history>")
        return "\n".join(lines)


def _line(n: int) -> str:
    return f"Nachricht {n}: Check wo das Chemitek-Paket bleibt, und was kostet Nachnahme?"


def seed_ops(directory: Path, count: int) -> tuple[float, float]:
    """Seconds of CPU and wall per seed op (add + context)."""
    ring = SeedRing(directory / "conversation_memory.json")
    answer = "UPS Tracking 1Z999AA10123456784 — Status: In Transit.\nZustellung: Mittwoch."
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(count):
        ring.add(_line(n), answer, "telegram_579304651", "/opt/bridge")
        ring.context()
    return (time.process_time() - cpu) / count, (time.perf_counter() - wall) / count


def chat_run(directory: Path, lines: int) -> tuple[float, float]:
    """CPU and wall seconds of one `chatbridge chat` answering `lines` lines."""
    directory.mkdir(parents=True)
    stdin = "".join(f"{_line(n)}\n" for n in range(lines)).encode()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(
        [*CHATBRIDGE, "chat"], input=stdin, cwd=directory, env=clean_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    small, large = args.messages, args.messages * 11
    per_chat_cpu, per_chat_wall, per_seed_cpu, per_seed_wall = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for part in ("seed", "chat") if n % 2 == 0 else ("chat", "seed"):
                root = Path(tmp) / f"{part}-{n}"
                if part == "seed":
                    root.mkdir()
                    cpu, wall = seed_ops(root, large - small)
                    per_seed_cpu.append(cpu)
                    per_seed_wall.append(wall)
                else:
                    cpu_s, wall_s = chat_run(root / "small", small)
                    cpu_l, wall_l = chat_run(root / "large", large)
                    per_chat_cpu.append((cpu_l - cpu_s) / (large - small))
                    per_chat_wall.append((wall_l - wall_s) / (large - small))
    seed_cpu, chat_cpu = statistics.median(per_seed_cpu), statistics.median(per_chat_cpu)
    seed_wall, chat_wall = statistics.median(per_seed_wall), statistics.median(per_chat_wall)
    print(
        f"# {args.rounds} rounds, alternating; {large - small} messages/ops per round; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n"
    )
    print("| per message | CPU ms | wall ms |")
    print("|---|---:|---:|")
    rows = [
        ("seed memory op (add + context, JSON file)", seed_cpu, seed_wall),
        ("`chatbridge chat` (debug provider, SQLite)", chat_cpu, chat_wall),
    ]
    for name, cpu, wall in rows:
        print(f"| {name} | {cpu * 1e3:.3f} | {wall * 1e3:.3f} |")
    print(f"| ratio chat / seed | {chat_cpu / seed_cpu:.2f} | {chat_wall / seed_wall:.2f} |")


if __name__ == "__main__":
    main()
