"""Which Telegram updates reach the engine, and as what.

Private chats: every text message from a human. Groups and supergroups: only
messages addressed to the bot, i.e. that @mention it, reply to one of its
messages, or start with a command meant for it (`/cmd` or `/cmd@thisbot`),
unless the group's scope says `require_mention: false` (the `MentionRule`):
then every message, marked as not addressed. Everything else returns `None`
and never reaches the engine.

The place is the chat and the platform (`telegram:-100123`, `telegram`); a
forum topic has no scope of its own and follows its group.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from telegram import Chat, Message, MessageEntity, Update

from chatbridge.core.media import kind_of
from chatbridge.core.models import (
    Attachment,
    AttachmentKind,
    ChatKind,
    Conversation,
    IncomingMessage,
)
from chatbridge.core.ports import MentionRule, always_mention
from chatbridge.platforms._mentions import strip_mentions

_UTF16 = "utf-16-le"
# "/help@this_bot args": the suffix names the bot a command is for.
_COMMAND_SUFFIX = re.compile(r"^(/[A-Za-z][A-Za-z0-9_]{0,31})@([A-Za-z0-9_]+)(?=\s|$)")
# Telegram clients send /start on first contact; it means "what is this bot?".
ALIASES = {"/start": "/help"}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who "me" is; `username` is without the leading `@`."""

    id: int
    username: str


def normalise(
    update: Update, me: BotIdentity, *, mention_rule: MentionRule = always_mention
) -> IncomingMessage | None:
    """The normalised message if the bot should answer `update`, else `None`.

    Where its reply goes travels in `reply_address` (`encode_address`): in
    groups the answer quotes the triggering message among other chatter; in
    private chats it does not. Edited messages are ignored on purpose: the first version was already
    answered, and answering each edit would put two replies in the chat. Bots
    (including this one) are ignored so two bots can never talk in a loop.
    """
    msg = update.message
    if msg is None:
        return None
    attachments = attachments_of(msg)
    if not isinstance(msg.text, str) and not attachments:
        return None
    sender = msg.from_user
    if sender is None or sender.is_bot:
        return None
    place = (f"telegram:{msg.chat.id}", "telegram")
    addressed = True
    if msg.chat.type == Chat.PRIVATE:
        kind = ChatKind.PRIVATE
    elif msg.chat.type in (Chat.GROUP, Chat.SUPERGROUP):
        kind = ChatKind.GROUP
        addressed = _addressed_to_me(msg, me)
        if not addressed and (mention_rule(place) or _command_for_another(msg, me)):
            return None
    else:
        return None
    text = normalise_command(_strip_mentions(msg, me), me)
    if not text and not attachments:
        return None  # a bare "@bot" carries no question
    # Outside forums, `message_thread_id` also marks reply chains; only a real
    # forum topic is a separate conversation.
    thread = msg.message_thread_id if msg.is_topic_message else None
    conversation = Conversation(
        platform="telegram",
        chat=str(msg.chat.id),
        user=str(sender.id),
        thread=str(thread or ""),
        kind=kind,
    )
    reply_to = msg.message_id if kind is ChatKind.GROUP else None
    return IncomingMessage(
        conversation=conversation,
        text=text,
        event_id=str(update.update_id),
        reply_address=encode_address(msg.chat.id, thread, reply_to),
        attachments=attachments,
        order=msg.message_id,  # increases within a chat: the conversation's order
        place=place,
        addressed=addressed,
    )


def encode_address(chat_id: int, thread_id: int | None, reply_to: int | None) -> str:
    """Where the answer goes, as stored with the inbox entry."""
    return json.dumps({"chat": chat_id, "thread": thread_id, "reply_to": reply_to})


def decode_address(address: str) -> tuple[int, int | None, int | None]:
    """`(chat_id, thread_id, reply_to)`; ValueError for anything else."""
    # What encode_address writes is short; a long text is refused before
    # json.loads could recurse through deep nesting.
    data = json.loads(address) if len(address) <= _ADDRESS_MAX else None
    if not isinstance(data, dict):
        raise ValueError("not a telegram reply address")
    chat, thread, reply_to = data.get("chat"), data.get("thread"), data.get("reply_to")
    if type(chat) is not int or not all(v is None or type(v) is int for v in (thread, reply_to)):
        raise ValueError("not a telegram reply address")
    return chat, thread, reply_to


_ADDRESS_MAX = 200


def normalise_command(text: str, me: BotIdentity) -> str:
    """`/help@thisbot x` -> `/help x`, `/start` -> `/help`; other text unchanged."""
    match = _COMMAND_SUFFIX.match(text)
    if match is not None and match.group(2).casefold() == me.username.casefold():
        text = match.group(1) + text[match.end() :]
    command, space, rest = text.partition(" ")
    alias = ALIASES.get(command.lower())
    return f"{alias}{space}{rest}" if alias else text


def _addressed_to_me(msg: Message, me: BotIdentity) -> bool:
    return bool(_my_mentions(msg, me)) or _replies_to_me(msg, me) or _command_for_me(msg, me)


def _body(msg: Message) -> tuple[str, tuple[MessageEntity, ...]]:
    """The text and its entities: a media message's are its caption's."""
    if msg.text is not None:
        return msg.text, tuple(msg.entities)
    return msg.caption or "", tuple(msg.caption_entities)


def _entity_texts(msg: Message, types: list[str] | None = None) -> dict[MessageEntity, str]:
    """Like `Message.parse_entities`, but a lone surrogate in the text (which
    PTB cannot encode) cannot make it raise: offsets are UTF-16 units either way."""
    text, entities = _body(msg)
    units = text.encode(_UTF16, "surrogatepass")
    return {
        entity: units[entity.offset * 2 : (entity.offset + entity.length) * 2].decode(
            _UTF16, "replace"
        )
        for entity in entities
        if types is None or entity.type in types
    }


def _my_mentions(msg: Message, me: BotIdentity) -> list[MessageEntity]:
    handle = f"@{me.username}".casefold()
    found = []
    for entity, text in _entity_texts(msg).items():
        if entity.type == MessageEntity.MENTION and text.casefold() == handle:
            found.append(entity)
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == me.id:
            found.append(entity)
    return found


def _replies_to_me(msg: Message, me: BotIdentity) -> bool:
    replied = msg.reply_to_message
    # In forum topics every message "replies" to the topic's service message;
    # that one is no reply to us even when the bot created the topic.
    if replied is None or replied.forum_topic_created is not None:
        return False
    return replied.from_user is not None and replied.from_user.id == me.id


def _command_for_me(msg: Message, me: BotIdentity) -> bool:
    for entity, text in _entity_texts(msg, [MessageEntity.BOT_COMMAND]).items():
        if entity.offset != 0:
            continue
        _, at, target = text.partition("@")
        return not at or target.casefold() == me.username.casefold()
    return False


def _command_for_another(msg: Message, me: BotIdentity) -> bool:
    """`/cmd@otherbot`: never ours, also where no mention is needed."""
    for entity, text in _entity_texts(msg, [MessageEntity.BOT_COMMAND]).items():
        if entity.offset == 0:
            _, at, target = text.partition("@")
            return bool(at) and target.casefold() != me.username.casefold()
    return False


def _strip_mentions(msg: Message, me: BotIdentity) -> str:
    """`msg.text` (or caption) without the bot's @mentions (`strip_mentions`);
    the entities' offsets are UTF-16 units, as Telegram sends them."""
    text, _ = _body(msg)
    units = text.encode(_UTF16, "surrogatepass")

    def index(offset: int) -> int:  # a UTF-16 offset as an index into `text`
        return len(units[: offset * 2].decode(_UTF16, "surrogatepass"))

    spans = [(index(e.offset), index(e.offset + e.length)) for e in _my_mentions(msg, me)]
    return strip_mentions(text, spans)


def attachments_of(msg: Message) -> tuple[Attachment, ...]:
    """The files of `msg` as references (`file_id`s), never downloaded here.

    A photo comes in several sizes: its reference lists them all, largest
    first (`photo_ref`), so the download can take the largest that fits the
    limit; its `size` is the smallest one's. Stickers, polls, locations and
    the like are no files to read and are left out.
    """
    found: list[Attachment] = []
    if msg.photo:
        sizes = sorted(msg.photo, key=lambda p: (p.file_size or 0, p.width * p.height))
        ref = photo_ref([(p.file_id, p.file_size or 0) for p in reversed(sizes)])
        found.append(
            Attachment(
                AttachmentKind.IMAGE, "image/jpeg", sizes[0].file_size or 0, "photo.jpg", ref
            )
        )
    if msg.voice is not None:
        v = msg.voice
        mime = v.mime_type or "audio/ogg"
        found.append(
            Attachment(AttachmentKind.VOICE, mime, v.file_size or 0, "voice.ogg", v.file_id)
        )
    if msg.audio is not None:
        a = msg.audio
        name = a.file_name or "audio.mp3"
        found.append(
            Attachment(AttachmentKind.AUDIO, a.mime_type or "", a.file_size or 0, name, a.file_id)
        )
    if msg.document is not None:
        d = msg.document
        name, mime = d.file_name or "file", d.mime_type or ""
        found.append(Attachment(kind_of(mime, name), mime, d.file_size or 0, name, d.file_id))
    for media, name in ((msg.video, "video.mp4"), (msg.video_note, "video.mp4")):
        if media is not None:
            mime = getattr(media, "mime_type", None) or "video/mp4"
            found.append(
                Attachment(AttachmentKind.OTHER, mime, media.file_size or 0, name, media.file_id)
            )
    return tuple(found)


def photo_ref(sizes: list[tuple[str, int]]) -> str:
    """A photo's sizes, largest first, as one reference string."""
    return json.dumps({"photo": sizes})


def photo_sizes(ref: str) -> list[tuple[str, int]] | None:
    """The sizes `photo_ref` wrote, or None for a plain `file_id`."""
    if not ref.startswith("{"):
        return None
    data = json.loads(ref)
    sizes = data.get("photo") if isinstance(data, dict) else None
    if not isinstance(sizes, list):
        raise ValueError("not a telegram photo reference")
    return [(str(file_id), int(size)) for file_id, size in sizes]
