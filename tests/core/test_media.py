"""core.media through the real engine: what the model sees of attachments.

The engine, store (SQLite) and media desk are real; the provider, the outbox
(with its `FileSource` side) and the transcriber are in-process fakes of our
own Protocols. The platforms' downloads run against fake servers elsewhere
(tests/scenarios/test_media_*.py).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.media import KEEP_TURNS, MediaSettings
from chatbridge.core.models import (
    Attachment,
    AttachmentKind,
    ChatKind,
    Conversation,
    IncomingMessage,
)
from chatbridge.core.ports import ByteSink, FetchFailed, FileTooLarge, MediaRejected
from chatbridge.providers.base import Prompt
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider
from tests.support.media import PDF, png

ALICE, BOB = "1", "2"


class FileOutbox(RecordingOutbox):
    """An outbox whose platform hands over files from a dict (ref -> bytes)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__()
        self.files = files
        self.fetched: list[str] = []

    async def fetch_file(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        data = self.files.get(attachment.ref)
        if data is None:
            raise FetchFailed("gone")
        if len(data) > limit:
            raise FileTooLarge("too large")
        self.fetched.append(attachment.ref)
        if sink is None:
            return bytearray(data)
        sink.expect(len(data))
        for start in range(0, len(data), 1000):  # in chunks, as a download arrives
            sink.write(data[start : start + 1000])
        return bytearray()


class Hearing:
    def __init__(self, text: str = "Soll Mittwoch kommen") -> None:
        self.text = text
        self.heard: list[bytes] = []

    async def transcribe(self, audio: bytes | bytearray, *, name: str, mime: str) -> str:
        self.heard.append(bytes(audio))
        return self.text


class SeeingProvider(ScriptedProvider):
    accepts = frozenset({"image", "document"})


def _engine(
    tmp_path: Path,
    provider: ScriptedProvider,
    *,
    media: MediaSettings | None = None,
    max_message_chars: int = 8000,
    transcriber: Hearing | None = None,
) -> Engine:
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    settings = EngineSettings(
        language="de", media=media or MediaSettings(), max_message_chars=max_message_chars
    )
    engine = Engine(
        settings,
        store=store,
        provider=provider,
        access=AccessPolicy(allow=("telegram:1", "telegram:2", "telegram:-100")),
        clock=ManualClock(),
        transcriber=transcriber,
    )
    return engine


async def _say(
    engine: Engine,
    outbox: FileOutbox,
    text: str,
    attachments: Sequence[Attachment] = (),
    *,
    user: str = ALICE,
    chat: str | None = None,
) -> list[str]:
    kind = ChatKind.GROUP if chat else ChatKind.PRIVATE
    conversation = Conversation("telegram", chat or user, user, "", kind)
    before = len(outbox.texts)
    message = IncomingMessage(conversation, text, attachments=tuple(attachments))
    await engine.handle(message, outbox)
    return outbox.texts[before:]


def _image(ref: str, size: int = 0) -> Attachment:
    return Attachment(AttachmentKind.IMAGE, "image/jpeg", size, "photo.jpg", ref)


def _parts(prompt: Prompt) -> list[list[bytes]]:
    """Per user turn of the prompt: the base64 data of its parts."""
    return [[bytes(p.data) for p in t.parts] for t in prompt.messages if t.role == "user"]


async def _open(engine: Engine, closing: Closing) -> None:
    await engine.store.open()
    closing(engine.store)


async def test_an_image_stays_in_the_session_for_its_message_and_the_next_three(
    tmp_path: Path, closing: Closing
) -> None:
    provider = SeeingProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    image = png(600)
    outbox = FileOutbox({"img": image})
    await _say(engine, outbox, "Was steht da?", [_image("img")])
    for n in range(KEEP_TURNS + 1):
        await _say(engine, outbox, f"Frage {n}")
    encoded = base64.b64encode(image)
    seen = [_parts(p)[0] for p in provider.prompts]
    assert seen == [[encoded]] * (KEEP_TURNS + 1) + [[]]
    first_turn = provider.prompts[-1].messages[0]
    assert first_turn.content == "[Bild] Was steht da?"
    assert outbox.fetched == ["img"], "fetched once, kept in memory for the next messages"
    ring = await engine.store.ring(f"telegram:{ALICE}", since=0)
    assert ring[0].user_message == "[Bild] Was steht da?"
    assert all(encoded[:40].decode() not in e.user_message for e in ring)


async def test_one_users_image_never_reaches_another_users_request(
    tmp_path: Path, closing: Closing
) -> None:
    provider = SeeingProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"img": png(500)})
    await _say(engine, outbox, "Mein Ausweis", [_image("img")], chat="-100")
    await _say(engine, outbox, "Und was siehst du?", user=BOB, chat="-100")
    bobs = provider.prompts[-1]
    assert all(not t.parts for t in bobs.messages)
    assert "Ausweis" not in "".join(t.content for t in bobs.messages)


async def test_a_provider_refusing_the_image_gets_the_text_alone(
    tmp_path: Path, closing: Closing
) -> None:
    def script(prompt: Prompt) -> list[str | Exception]:
        if any(t.parts for t in prompt.messages):
            return [MediaRejected("HTTP 400", provider="main")]
        return ["Nur Text."]

    provider = SeeingProvider(script)
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"img": png(500)})
    shown = await _say(engine, outbox, "Was ist das?", [_image("img")])
    assert shown == ["Der KI-Dienst hat das Bild nicht angenommen; ich lese nur deinen Text.",
                     "Nur Text."]  # fmt: skip
    await _say(engine, outbox, "Und jetzt?")
    assert all(not t.parts for t in provider.prompts[-1].messages), "not sent again"
    assert len(outbox.texts) == 3, "one sentence only, not again with the next message"


async def test_files_that_cannot_be_used_get_one_sentence_each(
    tmp_path: Path, closing: Closing
) -> None:
    provider = ScriptedProvider("ok")  # text only: no images, no PDFs
    engine = _engine(tmp_path, provider, media=MediaSettings(max_file_bytes=1000))
    await _open(engine, closing)
    outbox = FileOutbox({"img": png(500), "pdf": PDF, "zip": b"PK\x03\x04"})
    attachments = [
        _image("img"),
        Attachment(AttachmentKind.OTHER, "application/pdf", len(PDF), "brief.pdf", "pdf"),
        Attachment(AttachmentKind.OTHER, "application/zip", 4, "daten.zip", "zip"),
        Attachment(AttachmentKind.TEXT, "text/plain", 5000, "gross.txt", "big"),
        Attachment(AttachmentKind.VOICE, "audio/ogg", 10, "voice.ogg", "voice"),
    ]
    shown = await _say(engine, outbox, "Schau mal", attachments)
    assert shown == [
        "Das KI-Modell hier kann keine Bilder ansehen; ich lese nur deinen Text.",
        "Das KI-Modell hier kann keine PDFs lesen; brief.pdf habe ich nicht geöffnet.",
        "Ich kann Bilder, Sprachnachrichten, Textdateien und PDFs lesen; "
        "daten.zip ist nichts davon.",
        "gross.txt ist größer als 1000 bytes, deshalb habe ich die Datei nicht geöffnet.",
        "Sprachnachrichten kann ich hier nicht anhören; bitte schreib mir.",
        "ok",
    ]
    assert outbox.fetched == [], "nothing fetched that could not be used"
    assert provider.prompts[-1].messages[-1].content == "Schau mal"


async def test_a_lone_file_that_cannot_be_used_asks_the_model_nothing(
    tmp_path: Path, closing: Closing
) -> None:
    provider = ScriptedProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"zip": b"PK"})
    zip_file = Attachment(AttachmentKind.OTHER, "application/zip", 2, "a.zip", "zip")
    shown = await _say(engine, outbox, "", [zip_file])
    assert len(shown) == 1
    assert "a.zip" in shown[0]
    assert provider.prompts == []
    assert await engine.store.ring(f"telegram:{ALICE}", since=0) == []
    assert await engine.store.inbox_pending() == []


async def test_a_text_file_follows_the_caption_and_both_are_cut_together(
    tmp_path: Path, closing: Closing
) -> None:
    provider = ScriptedProvider("ok")
    engine = _engine(tmp_path, provider, max_message_chars=300)
    await _open(engine, closing)
    body = "Zeile mit Inhalt. " * 100
    outbox = FileOutbox({"log": body.encode()})
    notes = Attachment(AttachmentKind.TEXT, "text/plain", len(body), "log.txt", "log")
    await _say(engine, outbox, "Was steht im Log?", [notes])
    sent = provider.prompts[-1].messages[-1].content
    assert sent.startswith("Was steht im Log?\n\n--- Datei log.txt ---\nZeile mit Inhalt.")
    whole = len("Was steht im Log?\n\n--- Datei log.txt ---\n") + len(body)
    assert whole == 1841
    head, _, note = sent.rpartition("\n\n")
    assert note == f"[Nachricht gekürzt: {len(head)} von 1.841 Zeichen]"
    assert len(head) <= 300


async def test_a_binary_file_posing_as_text_and_a_fake_image_are_refused(
    tmp_path: Path, closing: Closing
) -> None:
    provider = SeeingProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"bin": b"\x00\x01\x02ELF", "img": b"<html>not an image</html>"})
    attachments = [
        Attachment(AttachmentKind.TEXT, "text/plain", 7, "notes.txt", "bin"),
        _image("img"),
    ]
    shown = await _say(engine, outbox, "Lies das", attachments)
    assert shown[0] == "notes.txt sieht nicht nach einer Textdatei aus; ich habe sie nicht gelesen."
    assert shown[1].startswith("photo.jpg ist kein Bild, das ich lesen kann")
    assert shown[2] == "ok"
    assert provider.prompts[-1].messages[-1].content == "Lies das"
    assert not provider.prompts[-1].messages[-1].parts


async def test_a_pdf_goes_to_a_provider_that_reads_documents(
    tmp_path: Path, closing: Closing
) -> None:
    provider = SeeingProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"pdf": PDF})
    letter = Attachment(AttachmentKind.OTHER, "application/pdf", len(PDF), "brief.pdf", "pdf")
    await _say(engine, outbox, "Fass zusammen", [letter])
    turn = provider.prompts[-1].messages[-1]
    assert [(p.kind, p.mime, p.name) for p in turn.parts] == [
        ("document", "application/pdf", "brief.pdf")
    ]
    assert base64.b64decode(turn.parts[0].data) == PDF
    assert turn.content == "[PDF brief.pdf] Fass zusammen"


async def test_voice_is_answered_as_typed_and_the_ring_keeps_the_transcript(
    tmp_path: Path, closing: Closing
) -> None:
    provider = ScriptedProvider("Mittwoch, ja.")
    hearing = Hearing()
    engine = _engine(
        tmp_path, provider, media=MediaSettings(transcription=True), transcriber=hearing
    )
    await _open(engine, closing)
    outbox = FileOutbox({"v": b"OggS-voice"})
    voice = Attachment(AttachmentKind.VOICE, "audio/ogg", 10, "voice.ogg", "v")
    shown = await _say(engine, outbox, "", [voice])
    assert hearing.heard == [b"OggS-voice"]
    assert shown == ["🎤 „Soll Mittwoch kommen“", "Mittwoch, ja."]
    assert provider.prompts[-1].messages[-1].content == "Soll Mittwoch kommen"
    ring = await engine.store.ring(f"telegram:{ALICE}", since=0)
    assert [e.user_message for e in ring] == ["Soll Mittwoch kommen"]


async def test_a_new_session_never_sees_an_earlier_sessions_image(
    tmp_path: Path, closing: Closing
) -> None:
    provider = SeeingProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({"img": png(500)})
    await _say(engine, outbox, "Mein Ausweis", [_image("img")])
    await _say(engine, outbox, "/new")
    # Typed to look exactly like the earlier turn's placeholder text.
    await _say(engine, outbox, "[Bild] Mein Ausweis")
    assert all(not t.parts for t in provider.prompts[-1].messages)


async def test_a_broken_file_name_is_stored_and_repeated_safely(
    tmp_path: Path, closing: Closing
) -> None:
    provider = ScriptedProvider("ok")
    engine = _engine(tmp_path, provider)
    await _open(engine, closing)
    outbox = FileOutbox({})
    odd = Attachment(AttachmentKind.OTHER, "application/x\ud800", 3, "a\ud800b\x1b[31m.bin", "r")
    shown = await _say(engine, outbox, "", [odd])
    assert shown == ["Ich kann Bilder, Sprachnachrichten, Textdateien und PDFs lesen; "
                     "a\ufffdb[31m.bin ist nichts davon."]  # fmt: skip
