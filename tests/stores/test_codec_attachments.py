"""Attachments in the inbox: stored as references, read back as they were."""

from __future__ import annotations

import pytest

from chatbridge.core.models import Attachment, AttachmentKind, Conversation, IncomingMessage
from chatbridge.stores._codec import message_from_json, message_to_json

VOICE = Attachment(AttachmentKind.VOICE, "audio/ogg", 4000, "voice.ogg", "AwACAgIAAxkB", True)
PHOTO = Attachment(AttachmentKind.IMAGE, "image/jpeg", 0, "photo.jpg", '{"photo": [["a", 1]]}')


def test_attachments_round_trip_and_plain_messages_stay_as_they_were() -> None:
    message = IncomingMessage(
        Conversation("telegram", "1", "1"), "caption", event_id="9", attachments=(VOICE, PHOTO)
    )
    raw = message_to_json(message)
    assert raw["attachments"][0] == {
        "kind": "voice", "mime": "audio/ogg", "name": "voice.ogg", "ref": "AwACAgIAAxkB",
        "size": 4000, "transcript_shown": True,
    }  # fmt: skip
    assert message_from_json(raw) == message
    plain = IncomingMessage(Conversation("telegram", "1", "1"), "hi", event_id="10")
    assert "attachments" not in message_to_json(plain)
    assert message_from_json(message_to_json(plain)) == plain


@pytest.mark.parametrize(
    "bad",
    [
        "not a list",
        [{"kind": "image", "mime": "", "name": "", "ref": "x"}],  # no size
        [{"kind": "movie", "mime": "", "name": "", "ref": "x", "size": 1}],
        [{"kind": "image", "mime": 1, "name": "", "ref": "x", "size": 1}],
    ],
)
def test_a_damaged_attachment_is_a_value_error_naming_no_reference(bad: object) -> None:
    raw = message_to_json(IncomingMessage(Conversation("telegram", "1", "1"), "x"))
    raw["attachments"] = bad
    with pytest.raises(ValueError, match="attachment") as caught:
        message_from_json(raw)
    assert "'x'" not in str(caught.value)
