"""Which kind a file is, from its MIME type and name; and what its bytes really are."""

from __future__ import annotations

import dataclasses

from chatbridge.core.incoming import clean_text
from chatbridge.core.models import Attachment, AttachmentKind, IncomingMessage

__all__ = ["IMAGE_TYPES", "PDF", "clean_attachments", "kind_of", "sniff_image"]

NAME_CHARS = 120  # a file name as the bot repeats it in a sentence or the prompt

PDF = "application/pdf"
# What both OpenAI and Anthropic take as image input.
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/x-yaml",
        "application/yaml",
        "application/xml",
        "application/csv",
        "application/javascript",
        "application/x-sh",
        "application/x-python",
        "application/sql",
        "application/toml",
        "application/x-ndjson",
    }
)
_TEXT_SUFFIXES = frozenset(
    "txt md markdown rst csv tsv json jsonl yaml yml toml ini cfg conf log xml html htm css "
    "js mjs ts tsx jsx py rb go rs java kt c h cc cpp hpp cs php sh bash zsh sql swift "
    "scala lua r pl ex exs erl hs ml clj dart vue svelte tex srt vtt env properties gradle".split()
)
_IMAGE_SUFFIXES = {
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
}


def kind_of(mime: str, name: str = "") -> AttachmentKind:
    """The kind for a file a platform announced with `mime` (may be "" or
    `application/octet-stream`) and file `name`. Voice notes are marked by
    the adapters themselves; an audio file here is AUDIO."""
    mime = (mime or "").split(";")[0].strip().lower()
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if mime.startswith("image/") or (not mime_says(mime) and suffix in _IMAGE_SUFFIXES):
        return AttachmentKind.IMAGE
    if mime.startswith("audio/"):
        return AttachmentKind.AUDIO
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return AttachmentKind.TEXT
    if not mime_says(mime) and suffix in _TEXT_SUFFIXES:
        return AttachmentKind.TEXT
    return AttachmentKind.OTHER


def mime_says(mime: str) -> bool:
    """False for a MIME type that says nothing (absent or generic binary)."""
    return bool(mime) and mime not in ("application/octet-stream", "binary/octet-stream")


def is_pdf(mime: str, name: str) -> bool:
    mime = (mime or "").split(";")[0].strip().lower()
    return mime == PDF or (not mime_says(mime) and name.lower().endswith(".pdf"))


def sniff_image(data: bytes | bytearray) -> str:
    """The image type the bytes really are (one the providers take), or ""."""
    head = bytes(data[:16])
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return ""


def looks_binary(data: bytes | bytearray) -> bool:
    """A file announced as text that is not (a NUL in its first 8 KB)."""
    return b"\x00" in bytes(data[:8192])


def clean_attachments(message: IncomingMessage) -> tuple[Attachment, ...]:
    """The message's attachments with names, types and references made safe
    for the store and the chat (`incoming.clean_text`); names cut short."""
    return tuple(
        dataclasses.replace(
            a,
            name=clean_text(a.name)[:NAME_CHARS],
            mime=clean_text(a.mime)[:NAME_CHARS],
            ref=clean_text(a.ref),
        )
        for a in message.attachments
    )
