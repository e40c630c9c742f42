"""Which Discord messages reach the engine, and as what.

DMs: every message from a human. Guild channels: only messages that mention
the bot or reply to one of its messages. Threads are their own conversation
(`thread` = the thread's id, `chat` = its parent channel); in a thread the bot
created or already answered in, every message counts, no mention needed.
Bots (this one included), webhooks, system messages and edits never reach
the engine. With `thread_per_mention`, a channel mention is answered in a new
thread started from the question; its conversation is that thread already,
so follow-ups there continue the same session.

Where the place's scope says `require_mention: false` (the `MentionRule`),
channel and thread messages need no mention either; they are marked as not
addressed. The place is the thread (a Discord thread is a channel), the
channel, the server and the platform: `discord:THREAD`, `discord:CHANNEL`,
`discord:guild:ID`, `discord`; a DM is its channel and the platform.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from dataclasses import dataclass

import discord

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

__all__ = ["Address", "decode_address", "encode_address", "normalise"]
_ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)


@dataclass(frozen=True, slots=True)
class Address:
    """Where an answer goes: `channel`, the message it quotes, whether it opens a thread.

    With `open_thread`, `reply_to` is the question, and the thread started from
    it has the question's id (Discord gives such a thread its message's id).
    """

    channel: int
    reply_to: int | None = None
    open_thread: bool = False


def encode_address(address: Address) -> str:
    """`address` as stored with the inbox entry."""
    return json.dumps({"c": address.channel, "r": address.reply_to, "t": address.open_thread})


def decode_address(text: str) -> Address:
    """The `Address` `encode_address` wrote; ValueError for anything else."""
    # What encode_address writes is short; a long text is refused before
    # json.loads could recurse through deep nesting.
    data = json.loads(text) if len(text) <= _ADDRESS_MAX else None
    if not isinstance(data, dict):
        raise ValueError("not a discord reply address")
    channel, reply_to, thread = data.get("c"), data.get("r"), bool(data.get("t"))
    if type(channel) is not int or not (reply_to is None or type(reply_to) is int):
        raise ValueError("not a discord reply address")
    return Address(channel, reply_to, thread)


_ADDRESS_MAX = 200


def normalise(
    message: discord.Message,
    me: int,
    *,
    active_threads: Container[int] = (),
    thread_per_mention: bool = False,
    mention_rule: MentionRule = always_mention,
) -> IncomingMessage | None:
    """The normalised message if the bot should answer `message`, else None.

    `me` is the bot's user id; `active_threads` the threads the bot posted in.
    """
    author = message.author
    if author.bot or message.webhook_id is not None or message.type not in _ANSWERED_TYPES:
        return None
    channel = message.channel
    mentioned = me in message.raw_mentions
    thread = ""
    open_thread = False
    addressed = True
    if isinstance(channel, discord.DMChannel) or message.guild is None:
        kind, chat = ChatKind.PRIVATE, str(channel.id)
        place: tuple[str, ...] = (f"discord:{channel.id}", "discord")
    else:
        kind = ChatKind.GROUP
        server = (f"discord:guild:{message.guild.id}", "discord")
        if isinstance(channel, discord.Thread):
            parent = channel.parent_id or channel.id
            place = (f"discord:{channel.id}", f"discord:{parent}", *server)
            mine = channel.owner_id == me or channel.id in active_threads
            addressed = mentioned or _replies_to(message, me) or mine
            if not addressed and mention_rule(place):
                return None
            chat, thread = str(parent), str(channel.id)
        else:
            place = (f"discord:{channel.id}", *server)
            addressed = mentioned or _replies_to(message, me)
            if not addressed and mention_rule(place):
                return None
            chat = str(channel.id)
            open_thread = thread_per_mention and mentioned
            thread = str(message.id) if open_thread else ""
    text = strip_mentions(message.content, mention_spans(message.content, _mention(me)))
    attachments = attachments_of(message)
    if not text and not attachments:
        return None  # a bare "@bot" carries no question
    reply_to = message.id if kind is ChatKind.GROUP else None
    return IncomingMessage(
        conversation=Conversation(
            platform="discord", chat=chat, user=str(author.id), thread=thread, kind=kind
        ),
        text=text,
        event_id=str(message.id),
        order=message.id,  # a snowflake: grows with time
        reply_address=encode_address(Address(channel.id, reply_to, open_thread)),
        place=place,
        addressed=addressed,
        attachments=attachments,
    )


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """The message's files as references: the attachment URL (signed by
    Discord, expiring after about a day), fetched only when answering."""
    found = []
    for a in message.attachments:
        mime = (a.content_type or "").split(";")[0].strip()
        if a.is_voice_message():
            kind = AttachmentKind.VOICE
        else:
            kind = kind_of(mime, a.filename)
        found.append(Attachment(kind, mime, int(a.size or 0), a.filename, a.url))
    return tuple(found)


def _mention(me: int) -> re.Pattern[str]:
    """The bot's mention in message content: `<@id>` or `<@!id>`."""
    return re.compile(rf"<@!?{me}>")


def _replies_to(message: discord.Message, me: int) -> bool:
    ref = message.reference
    if ref is None:
        return False
    resolved = ref.resolved
    return isinstance(resolved, discord.Message) and resolved.author.id == me
