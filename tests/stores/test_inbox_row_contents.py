"""Issue 17.9: an inbox row holds what answering needs and nothing else.

A message waiting in the inbox is the conversation (platform, chat, user,
thread, kind), the text, the platform's event id and the reply address —
no display name, which nothing reads. Rows written before that change (with
a `user_name` field) still load.
"""

from __future__ import annotations

import dataclasses
import json

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.stores._codec import message_from_json, message_to_json

NEEDED = {"platform", "chat", "user", "thread", "kind", "text", "event_id", "reply_address"}


def test_an_incoming_message_carries_no_display_name() -> None:
    names = {f.name for f in dataclasses.fields(IncomingMessage)}
    assert "user_name" not in names


def test_a_stored_message_holds_only_the_fields_answering_needs() -> None:
    message = IncomingMessage(
        Conversation("telegram", "-100", "7", "3", ChatKind.GROUP), "Frage", event_id="9"
    )
    stored = message_to_json(message)
    # Another helper may add ordering fields; a display name is never among them.
    assert NEEDED <= set(stored)
    assert not {k for k in stored if "name" in k}
    assert message_from_json(json.loads(json.dumps(stored))) == message


def test_a_row_written_with_a_user_name_still_loads_without_it() -> None:
    old = {
        "platform": "telegram", "chat": "1", "user": "1", "thread": "", "kind": "private",
        "text": "hallo", "event_id": "5", "user_name": "Ada Lovelace", "reply_address": "{}",
    }  # fmt: skip
    message = message_from_json(old)
    assert message.text == "hallo"
    assert "Ada Lovelace" not in repr(message)
