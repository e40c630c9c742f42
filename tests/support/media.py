"""Shared pieces of the media scenarios: sample files and a `chatbridge run` child."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import CHATBRIDGE, clean_env, run_cli

PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def png(size: int = 2048, seed: int = 7) -> bytes:
    """Bytes that are a PNG as far as any sniffer can tell (signature first)."""
    body = bytes((seed * 31 + i * 17) % 251 for i in range(max(0, size - len(PNG_HEAD))))
    return PNG_HEAD + body


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
OGG = b"OggS\x00\x02" + bytes(range(200))

# The `media:` section every platform's media scenario runs with.
MEDIA: dict[str, Any] = {
    "transcription": {"provider": "main", "model": "gpt-4o-mini-transcribe"},
    "max_file_bytes": "50KB",
}

# (media section, provider vision, the sentence the user hears): images off,
# and a provider without vision; in both the caption is still answered.
IMAGES_REFUSED: list[tuple[dict[str, Any], bool, str]] = [
    ({"images": False}, True, "Bilder sind hier ausgeschaltet"),
    ({"images": True}, False, "kann keine Bilder ansehen"),
]


@dataclass
class Child:
    """A running `chatbridge run`; `stderr` is filled in once it stopped."""

    process: asyncio.subprocess.Process
    cwd: Path
    env: dict[str, str]
    stderr: str = ""
    stdout: str = ""
    code: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    async def memory(self, user: str) -> list[dict[str, Any]]:
        shown = await run_cli("memory", "show", "--user", user, cwd=self.cwd, env=self.env)
        assert shown.code == 0, shown.stderr
        return list(json.loads(shown.stdout))


@contextlib.asynccontextmanager
async def running(cwd: Path, config: str, env: Mapping[str, str]) -> AsyncIterator[Child]:
    """`chatbridge run` on `config` in `cwd`; SIGTERM and collected on exit."""
    (cwd / "chatbridge.yaml").write_text(config)
    full = clean_env(env)
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=cwd, env=full,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    child = Child(process, cwd, dict(env))
    try:
        yield child
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(process.communicate(), 30)
        child.stdout, child.stderr, child.code = out.decode(), err.decode(), process.returncode


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def openai_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content parts of the newest user message of a chat.completions body."""
    content = body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def openai_text(body: dict[str, Any]) -> str:
    return "\n".join(p.get("text", "") for p in openai_parts(body) if p.get("type") == "text")


def openai_images(body: dict[str, Any]) -> list[str]:
    """The newest user message's image URLs (data: URLs)."""
    return [p["image_url"]["url"] for p in openai_parts(body) if p.get("type") == "image_url"]
