"""From a message with attachments to the user turn the model sees.

`MediaDesk.prepare` fetches each attachment through the outbox's
`FileSource` (with the size cap), and returns the turn's text, its image and
document parts, the text the ring keeps, and one sentence per attachment that
could not be used. A failure of one attachment never stops the rest.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from chatbridge.core.media._encode import Base64Sink
from chatbridge.core.media._kinds import IMAGE_TYPES, PDF, is_pdf, looks_binary, sniff_image
from chatbridge.core.media._live import LiveMedia
from chatbridge.core.media._settings import MediaSettings
from chatbridge.core.media._texts import human_size, media_say, placeholder
from chatbridge.core.models import Attachment, AttachmentKind, IncomingMessage, MediaPart
from chatbridge.core.ports import (
    ByteSink,
    FetchFailed,
    FileSource,
    FileTooLarge,
    MediaError,
    Outbox,
    Provider,
    ProviderError,
    Transcriber,
)

__all__ = ["TRANSCRIBE_MAX", "MediaDesk", "Prepared", "accepted_media", "images_to_fetch"]

log = logging.getLogger(__name__)

TRANSCRIBE_MAX = 25 * 1024 * 1024  # OpenAI's transcription upload limit
HEARD_CHARS = 300  # the "what I understood" line shows at most this much


def accepted_media(provider: Provider) -> frozenset[str]:
    """What the provider takes besides text: "image", "document" (PDF).

    An optional attribute `accepts` of a provider; none means text only."""
    accepts: object = getattr(provider, "accepts", frozenset())
    return frozenset(accepts) if isinstance(accepts, frozenset | set | tuple) else frozenset()


def images_to_fetch(
    message: IncomingMessage, settings: MediaSettings, accepts: frozenset[str]
) -> int:
    """How many of the message's images `MediaDesk.prepare` would download
    and give the model (before any is fetched: what a limit checks first)."""
    if not (settings.images and "image" in accepts):
        return 0
    return sum(
        1
        for a in message.attachments
        if a.kind is AttachmentKind.IMAGE and a.size <= settings.max_file_bytes
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """The user turn for one message.

    `text`: what the model reads (caption, transcript, file text, placeholders);
    the ring keeps it too, so an image is remembered as `[Bild] caption`.
    `parts`: images and PDFs, inline. `notices`: one sentence each, for the
    user, sent before the answer. `answerable`: False when nothing is left to
    ask the model (a lone file that could not be used).
    """

    text: str
    parts: tuple[MediaPart, ...] = ()
    notices: tuple[str, ...] = ()
    heard: str = ""
    answerable: bool = True


@dataclass(slots=True)
class _Turn:
    caption: str
    language: str
    texts: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)  # placeholders ahead of the caption
    files: list[str] = field(default_factory=list)  # text files' contents, after the caption
    parts: list[MediaPart] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)

    def say(self, key: str, **values: object) -> None:
        self.notices.append(media_say(self.language, key, **values))


class MediaDesk:
    """Decides what happens to each attachment; holds the transcriber and the
    in-memory parts of live sessions (`LiveMedia`)."""

    def __init__(self, *, transcriber: Transcriber | None = None, live: LiveMedia | None = None):
        self.transcriber = transcriber
        self.live = live if live is not None else LiveMedia()

    async def prepare(
        self,
        message: IncomingMessage,
        outbox: Outbox,
        *,
        settings: MediaSettings,
        language: str,
        accepts: frozenset[str],
    ) -> Prepared:
        if not message.attachments:
            return Prepared(message.text)
        turn = _Turn(message.text.strip(), language)
        source = outbox if isinstance(outbox, FileSource) else None
        for attachment in message.attachments:
            try:
                await self._one(turn, attachment, source, settings, accepts)
            except FileTooLarge as exc:
                log.info("attachment refused: %s", exc)
                limit = _limit_for(attachment, settings)
                turn.say("too_large", name=_name(attachment), limit=human_size(limit))
            except MediaError as exc:
                log.warning("attachment not fetched: %s", exc)
                turn.say("fetch_failed", name=_name(attachment))
        return _assemble(turn)

    async def _one(
        self,
        turn: _Turn,
        attachment: Attachment,
        source: FileSource | None,
        settings: MediaSettings,
        accepts: frozenset[str],
    ) -> None:
        kind, name = attachment.kind, _name(attachment)
        if kind is AttachmentKind.IMAGE:
            if not settings.images:
                turn.say("images_off")
            elif "image" not in accepts:
                turn.say("no_vision")
            else:
                sink = await _fetch_encoded(source, attachment, settings.max_file_bytes)
                mime = sniff_image(sink.head)
                if mime not in IMAGE_TYPES:
                    turn.say("not_an_image", name=name)
                    return
                turn.parts.append(MediaPart("image", mime, sink.finish(), name))
                turn.marks.append(placeholder(turn.language, "image"))
        elif kind in (AttachmentKind.VOICE, AttachmentKind.AUDIO):
            await self._listen(turn, attachment, source, settings)
        elif kind is AttachmentKind.TEXT:
            data = await _fetch(source, attachment, settings.max_file_bytes)
            if looks_binary(data):
                turn.say("not_text", name=name)
                return
            text = bytes(data).decode("utf-8", "replace")
            turn.files.append(f"{placeholder(turn.language, 'file', name=name)}\n{text}")
        elif is_pdf(attachment.mime, attachment.name):
            if "document" not in accepts:
                turn.say("no_pdf", name=name)
                return
            sink = await _fetch_encoded(source, attachment, settings.max_file_bytes)
            if not sink.head.startswith(b"%PDF-"):
                turn.say("fetch_failed", name=name)
                return
            turn.parts.append(MediaPart("document", PDF, sink.finish(), name))
            turn.marks.append(placeholder(turn.language, "pdf", name=name))
        else:
            turn.say("unsupported", name=name)

    async def _listen(
        self,
        turn: _Turn,
        attachment: Attachment,
        source: FileSource | None,
        settings: MediaSettings,
    ) -> None:
        if not settings.voice:
            turn.say("voice_off")
            return
        if self.transcriber is None or not settings.transcription:
            turn.say("no_transcription")
            return
        limit = min(settings.max_file_bytes, TRANSCRIBE_MAX)
        data = await _fetch(source, attachment, limit)
        try:
            words = await self.transcriber.transcribe(
                data, name=attachment.name or "voice.ogg", mime=attachment.mime or "audio/ogg"
            )
        except (ProviderError, MediaError) as exc:
            log.warning("transcription failed: %s", exc)
            turn.say("transcription_failed")
            return
        words = " ".join(words.split())
        if not words:
            turn.say("nothing_heard")
            return
        turn.transcripts.append(words)
        if not attachment.transcript_shown:
            shown = words if len(words) <= HEARD_CHARS else words[: HEARD_CHARS - 1] + "…"
            turn.heard.append(media_say(turn.language, "heard", transcript=shown))


def _assemble(turn: _Turn) -> Prepared:
    """Transcripts come first (spoken words are the message), then the caption
    with the placeholders of images/PDFs ahead of it, then text files."""
    head = " ".join([*turn.marks, turn.caption]).strip()
    pieces = [*turn.transcripts, head, *turn.files]
    text = "\n\n".join(p for p in pieces if p)
    has_content = bool(turn.caption or turn.transcripts or turn.files or turn.parts)
    return Prepared(
        text=text,
        parts=tuple(turn.parts),
        notices=tuple(turn.notices),
        heard="\n".join(turn.heard),
        answerable=has_content,
    )


async def _fetch(
    source: FileSource | None, attachment: Attachment, limit: int, sink: ByteSink | None = None
) -> bytearray:
    if attachment.size > limit:
        # Refused on the platform's word: not a byte is fetched.
        raise FileTooLarge(f"{attachment.kind} of {attachment.size} bytes over {limit}")
    if source is None:
        raise FetchFailed("this platform cannot hand over files")
    if sink is None:
        return await source.fetch_file(attachment, limit=limit)
    return await source.fetch_file(attachment, limit=limit, sink=sink)


async def _fetch_encoded(
    source: FileSource | None, attachment: Attachment, limit: int
) -> Base64Sink:
    """The file base64-encoded while it downloads (images and PDFs go to the
    model so): the encoding overlaps the transfer, the raw file is never whole."""
    sink = Base64Sink()
    await _fetch(source, attachment, limit, sink)
    return sink


def _limit_for(attachment: Attachment, settings: MediaSettings) -> int:
    if attachment.kind in (AttachmentKind.VOICE, AttachmentKind.AUDIO):
        return min(settings.max_file_bytes, TRANSCRIBE_MAX)
    return settings.max_file_bytes


def _name(attachment: Attachment) -> str:
    if attachment.name:
        return attachment.name
    return {"image": "Image", "voice": "Voice message", "audio": "Audio"}.get(
        attachment.kind.value, "File"
    )
