"""Which Slack events are questions for the bot, as `IncomingMessage`s.

Answered:
- `message` in an `im` (a DM), always;
- `app_mention` in a channel, answered in its thread (`thread_ts`, or the
  mention's own `ts`, which starts one);
- a thread reply in a channel (`message.channels`/`message.groups`) in a
  thread the bot is part of (`AnsweredThreads`), without a new mention.

Ignored: messages with any `subtype` (edits, deletions, joins, bot_message,
…), messages from any bot (`bot_id`) or from the bot user itself, channel
messages outside the bot's threads, and channel messages that mention the
bot (Slack also sends those as `app_mention`, which is the one answered).

Where the channel's scope says `require_mention: false` (the `MentionRule`),
other channel messages are answered too, in their thread like a mention,
marked as not addressed. The place is the channel, the workspace and the
platform (`slack:C0TEAM`, `slack:team:T0123`, `slack`); a DM is in its
workspace too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chatbridge.core.media import kind_of
from chatbridge.core.models import (
    Attachment,
    AttachmentKind,
    ChatKind,
    Conversation,
    IncomingMessage,
)
from chatbridge.core.ports import MentionRule, always_mention
from chatbridge.platforms._mentions import mention_spans, strip_mentions
from chatbridge.platforms._threads import AnsweredThreads

__all__ = ["Address", "BotIdentity", "SlackThreads", "normalise", "ts_order"]

PLATFORM = "slack"
SlackThreads = AnsweredThreads[tuple[str, str]]
"""The threads the bot answered in, as `(channel, thread_ts)`."""


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """The bot as `auth.test` names it."""

    user_id: str


@dataclass(frozen=True, slots=True)
class Address:
    """Where an answer goes: `thread_ts` "" posts at the top of a DM; `ts` is
    the question's own message (the thread a status indicator belongs to)."""

    channel: str
    thread_ts: str = ""
    ts: str = ""

    def encode(self) -> str:
        return f"{self.channel}|{self.thread_ts}|{self.ts}"

    @classmethod
    def decode(cls, text: str) -> Address:
        """Raises `ValueError` for a string `encode` did not write."""
        parts = text.split("|")
        if len(parts) != 3 or not parts[0]:
            raise ValueError(f"not a slack reply address: {text!r}")
        return cls(*parts)


def _mention(bot_user_id: str) -> re.Pattern[str]:
    """The bot's own mention in message text: `<@U…>` or `<@U…|name>`."""
    return re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")


def normalise(
    event: dict[str, Any],
    event_id: str,
    me: BotIdentity,
    threads: SlackThreads,
    *,
    team: str = "",
    mention_rule: MentionRule = always_mention,
) -> IncomingMessage | None:
    """The question in `event`, or None when the bot must not answer it.

    `team` is the workspace the event came from (its scope `slack:team:ID`)."""
    kind, channel, user = event.get("type"), event.get("channel"), event.get("user")
    text, ts = event.get("text"), event.get("ts")
    if not (isinstance(channel, str) and isinstance(user, str) and isinstance(ts, str)):
        return None
    if event.get("subtype") not in (None, "file_share") or event.get("bot_id"):
        return None
    if user == me.user_id:
        return None
    attachments = attachments_of(event)
    if not isinstance(text, str):
        if not attachments:
            return None
        text = ""
    thread_ts = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else None
    place = (f"slack:{channel}", *((f"slack:team:{team}",) if team else ()), "slack")
    addressed = True
    if kind == "message" and event.get("channel_type") == "im":
        conversation = Conversation(PLATFORM, channel, user, "", ChatKind.PRIVATE)
        address = Address(channel, thread_ts or "", ts)
    elif kind == "app_mention":
        thread = thread_ts or ts
        threads.add((channel, thread))
        conversation = Conversation(PLATFORM, channel, user, thread, ChatKind.GROUP)
        address = Address(channel, thread, ts)
    elif kind == "message" and thread_ts and (channel, thread_ts) in threads:
        if f"<@{me.user_id}" in text:
            return None  # the app_mention event for the same message is answered
        conversation = Conversation(PLATFORM, channel, user, thread_ts, ChatKind.GROUP)
        address = Address(channel, thread_ts, ts)
    elif kind == "message" and f"<@{me.user_id}" not in text and not mention_rule(place):
        addressed, thread = False, thread_ts or ts
        conversation = Conversation(PLATFORM, channel, user, thread, ChatKind.GROUP)
        address = Address(channel, thread, ts)
    else:
        return None
    return IncomingMessage(
        conversation=conversation,
        text=strip_mentions(text, mention_spans(text, _mention(me.user_id))),
        event_id=event_id or f"{channel}-{ts}",
        reply_address=address.encode(),
        attachments=attachments,
        order=ts_order(ts),
        place=place,
        addressed=addressed,
    )


def attachments_of(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The event's `files` as references (`url_private_download`).

    An audio clip recorded in Slack (`subtype: slack_audio`) is a voice note
    whose transcript Slack itself shows; a file Slack hides from the app
    (`file_access: check_file_info`, no URL) is left out."""
    files = event.get("files")
    found: list[Attachment] = []
    for f in files if isinstance(files, list) else []:
        if not isinstance(f, dict):
            continue
        url = f.get("url_private_download") or f.get("url_private")
        if not isinstance(url, str) or not url:
            continue
        name, mime, size = f.get("name"), f.get("mimetype"), f.get("size")
        name = name if isinstance(name, str) and name else "file"
        mime = mime if isinstance(mime, str) else ""
        size = size if isinstance(size, int) and not isinstance(size, bool) else 0
        clip = f.get("subtype") == "slack_audio"
        kind = AttachmentKind.VOICE if clip else kind_of(mime, name)
        found.append(Attachment(kind, mime, size, name, url, transcript_shown=clip))
    return tuple(found)


def ts_order(ts: str) -> int:
    """A message `ts` ("1700000000.123456") as microseconds, the conversation's
    order; 0 (arrival order) for one that is not such a number."""
    seconds, _, fraction = ts.partition(".")
    if not seconds.isdigit() or not (fraction.isdigit() or fraction == ""):
        return 0
    return int(seconds) * 1_000_000 + int(fraction.ljust(6, "0")[:6])
