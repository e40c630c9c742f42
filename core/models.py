"""Values that flow through the engine.

Every value here is frozen: platform adapters build an `IncomingMessage`, the
engine derives the rest. Mutable state lives in `Session` (owned by one
conversation lock at a time) and in the store.
"""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, dataclass, field

from chatbridge.core.ledger import Settlement


class ChatKind(enum.StrEnum):
    """Who can read a chat; decides which ring entries may be shown there."""

    PRIVATE = "private"
    GROUP = "group"


@dataclass(frozen=True, slots=True)
class Conversation:
    """One live LLM session belongs to one conversation.

    `chat` and `user` are platform IDs without the platform prefix;
    `thread` is a forum topic / thread ID or "" for none.
    """

    platform: str
    chat: str
    user: str
    thread: str = ""
    kind: ChatKind = ChatKind.PRIVATE

    @property
    def key(self) -> str:
        """Stable storage key, unique per (platform, chat, thread, user)."""
        return f"{self.platform}:{self.chat}:{self.thread}:{self.user}"

    @property
    def user_id(self) -> str:
        """The user as written on the wire and in config: `platform:id`."""
        return f"{self.platform}:{self.user}"

    @property
    def chat_id(self) -> str:
        return f"{self.platform}:{self.chat}"


class AttachmentKind(enum.StrEnum):
    """What a file is for: core decides from the kind (and MIME type) what to do."""

    IMAGE = "image"
    VOICE = "voice"  # a recorded voice note (Telegram voice, Discord voice message, Slack clip)
    AUDIO = "audio"  # an audio file
    TEXT = "text"  # text/*, JSON, YAML, CSV, source code
    OTHER = "other"  # PDFs and everything else; core looks at the MIME type


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message, as data: never the bytes, never an SDK object.

    `ref` is the platform's own reference (a Telegram `file_id`, a Discord
    attachment URL, a Slack `url_private_download`); only that platform's
    outbox can turn it into bytes (`core.ports.FileSource`), with its auth.
    `size` is what the platform reported (0: unknown), checked before a
    download and enforced during it. `transcript_shown`: the platform shows
    its own transcript of this voice note (Slack clips), so the answer need
    not repeat what was understood.
    """

    kind: AttachmentKind
    mime: str
    size: int
    name: str
    ref: str
    transcript_shown: bool = False


@dataclass(frozen=True, slots=True)
class MediaPart:
    """File content that goes to the model inside a user turn: base64 data,
    never a URL. `kind` is "image" or "document" (a PDF). Only in prompts and
    in memory, never in the store."""

    kind: str
    mime: str
    # Base64 (ASCII), spliced into a request body without a text copy; a
    # bytearray when it was encoded during the download, never changed after.
    data: bytes | bytearray = field(hash=False)
    name: str = ""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A platform event, normalised; everything past `text` is keyword-only.

    `event_id` is the platform's ID of the event (unique per platform); the
    inbox drops a redelivered one. `reply_address` is whatever the platform's
    outbox needs to answer (chat, thread, message to reply to), as a string
    the platform encodes and decodes itself; it is stored with the inbox entry
    so an answer can still be delivered after a restart.

    It carries only what answering needs (it is stored as it is in the
    inbox): no display name or other profile data of the sender.

    `attachments` are the files sent with it, as references (`Attachment`);
    `text` is then the caption, possibly "".

    `order` is the platform's own order of the conversation's messages
    (Telegram `message_id`, Slack `ts` in microseconds, a Discord snowflake),
    0 where it has none; a conversation's messages are answered in this
    order, arrival order where it is 0.

    `sent_at` is the wall time the user sent it, set for a message fetched
    late (Discord's catch-up after a restart); 0 means it arrived as it was
    sent. The inbox entry's `received_at` is the earlier of the two, so
    `engine.redeliver_within` counts from when the user wrote.

    `place` is where it was sent, as scope IDs, most specific first
    (thread, channel/chat, server/workspace, platform); the adapter knows
    it, core resolves the scopes from it (`core.places`). Empty: the chat
    and its platform. `addressed` is False for a group message that neither
    mentions nor replies to the bot, taken only where a scope says
    `require_mention: false`; a sender who is not allowed gets no denial
    for such a message (they were not talking to the bot).
    """

    conversation: Conversation
    text: str
    _: KW_ONLY
    event_id: str = ""
    reply_address: str = ""
    attachments: tuple[Attachment, ...] = ()
    order: int = 0
    place: tuple[str, ...] = ()
    addressed: bool = True
    # Not stored and not compared: the inbox entry's `received_at` carries it.
    sent_at: float = field(default=0.0, compare=False)


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a live session as the provider saw it."""

    role: str  # "user" | "assistant"
    content: str
    parts: tuple[MediaPart, ...] = field(default=(), compare=False)
    """Images and documents sent with this turn's text; only in a `Prompt`,
    never stored (the stored turn holds the `[image]` placeholder text)."""


@dataclass(slots=True)
class Session:
    """The live LLM session of one conversation.

    Mutated only by the task holding that conversation's lock.
    """

    key: str
    user: str  # the ring owner (identity name or platform:id); lets forget find it
    started_at: float
    last_active: float
    turns: list[Turn] = field(default_factory=list)

    def idle_for(self, now: float) -> float:
        return now - self.last_active

    def expired(self, now: float, ttl: float) -> bool:
        """Idle exactly `ttl` is still alive; anything past it is expired."""
        return self.idle_for(now) > ttl


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One answered exchange in a user's ring (the seed's record plus its audience).

    `scope` is "private" for a private chat or `platform:chat` for a group: an
    entry is only ever shown to the audience that saw it.
    """

    timestamp: float
    user_message: str
    assistant_summary: str
    session_name: str
    workdir: str = ""
    user: str = ""
    scope: str = ChatKind.PRIVATE.value


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one request (or a sum of requests) used, as the provider reported them.

    `input_tokens` counts the whole prompt, the part read from the provider's
    prompt cache included; `cached_input_tokens` is that part (Anthropic's
    `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
        )


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A received message, held in the store until its answer is remembered.

    `key` is unique per platform event (`platform:event_id`), so it is also
    the redelivery check. `sent` lists the messages already posted for the
    answer (progress messages of a stream) and `answer` the final text,
    recorded before its final delivery: after a crash the answer is finished
    by editing those messages, never posted a second time.
    """

    key: str
    message: IncomingMessage
    received_at: float
    answer: str | None = None
    sent: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Exchange:
    """Everything one answered message changes, committed in one transaction."""

    ring_user: str
    session: Session
    entry: MemoryEntry
    usage: Usage
    day: str  # YYYY-MM-DD in the bot's timezone, for usage accounting
    added_turns: int = 2  # how many of session.turns are new (stores append only those)
    inbox_key: str = ""  # the inbox entry this exchange answers; marked done in the same commit
    fence: int = 0  # the conversation lease's fencing ticket; 0: no lease (one process)
    fence_key: str = ""  # the conversation whose lease `fence` belongs to
    settlement: Settlement | None = None  # the limits ledger's, written in the same commit


@dataclass(frozen=True, slots=True)
class ChannelCursor:
    """The newest message handled in one channel of a platform that does not
    redeliver (Discord), so what came after it can be fetched after a restart.

    `last_id` is the platform's increasing message ID (a Discord snowflake);
    `updated_at` the wall time of the channel's last handled traffic.
    """

    platform: str
    channel: str
    last_id: int
    updated_at: float
