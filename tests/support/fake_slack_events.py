"""Slack wire shapes for `fake_slack`: ids, `ts`, events, signed POSTs, API records/checks.

Pure functions and records, no server. The event builders return the inner
`event` object as the Events API delivers it (message.im / message.channels,
app_mention, message_changed, message_deleted, bot messages); send one with
`FakeSlack.socket_event` or `FakeSlack.post_event`. The `check_*` functions
refuse content the way the Web API does (error codes from Slack's method
reference). Imports nothing from the project.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

TEAM_ID, TEAM_NAME, TEAM_DOMAIN = "T0FAKETEAM", "Fake Team", "fake-team"
APP_ID, BOT_ID, BOT_USER_ID, BOT_NAME = "A0FAKEAPP", "B0FAKEBOT", "U0FAKEBOT", "bridge"
USER_ID, OTHER_USER_ID = "U0ALICE", "U0BOB"
DM_CHANNEL, CHANNEL = "D0ALICE", "C0GENERAL"
ACK_DEADLINE = 3.0  # Slack retries an event not acked (2xx / envelope ack) within 3 s
MAX_TEXT, MAX_MARKDOWN, MAX_SECTION, MAX_BLOCKS = 40_000, 12_000, 3_000, 50
DEFAULT_SCOPES = frozenset({
    "app_mentions:read", "assistant:write", "channels:history", "channels:read", "chat:write",
    "files:read",
    "groups:history", "groups:read", "im:history", "im:read", "im:write", "mpim:read",
    "users:read",
})  # fmt: skip

_last_us = 0


def next_ts() -> str:
    """A fresh message `ts` ("seconds.micros"), strictly increasing within the process."""
    global _last_us
    _last_us = max(time.time_ns() // 1000, _last_us + 1)
    return f"{_last_us // 1_000_000}.{_last_us % 1_000_000:06d}"


def channel_type(channel: str) -> str:
    """Events API `channel_type` for an id: D… im, G… group (private), else channel."""
    return {"D": "im", "G": "group"}.get(channel[:1], "channel")


def sign(signing_secret: str, timestamp: int | str, body: str | bytes) -> str:
    """`X-Slack-Signature` value: v0=HMAC_SHA256(secret, "v0:{ts}:{body}")."""
    raw = body.encode() if isinstance(body, str) else body
    base = f"v0:{timestamp}:".encode() + raw
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


# -- events ------------------------------------------------------------------
def _rich_text(text: str) -> list[dict[str, Any]]:
    section = {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
    return [{"type": "rich_text", "block_id": uuid.uuid4().hex[:5], "elements": [section]}]


def user_message(
    text: str, *, channel: str, user: str = USER_ID, thread_ts: str | None = None,
    ts: str | None = None, kind: str = "message",
) -> dict[str, Any]:  # fmt: skip
    """A human's message as `message.*` delivers it (or an `app_mention` with kind=)."""
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "client_msg_id": str(uuid.uuid4()), "type": kind, "text": text, "user": user,
        "ts": ts, "blocks": _rich_text(text), "team": TEAM_ID, "channel": channel,
        "event_ts": ts,
    }  # fmt: skip
    if kind == "message":
        event["channel_type"] = channel_type(channel)
    if thread_ts is not None:
        event |= {"thread_ts": thread_ts, "parent_user_id": user}
    return event


def dm_message(
    text: str, *, user: str = USER_ID, channel: str = DM_CHANNEL, thread_ts: str | None = None,
    ts: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A direct message to the bot (`message.im`, channel_type "im")."""
    return user_message(text, channel=channel, user=user, thread_ts=thread_ts, ts=ts)


def channel_message(
    text: str, *, channel: str = CHANNEL, user: str = USER_ID, thread_ts: str | None = None,
    ts: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A plain channel message (`message.channels`); a thread reply when `thread_ts` is set."""
    return user_message(text, channel=channel, user=user, thread_ts=thread_ts, ts=ts)


def app_mention(
    text: str, *, channel: str = CHANNEL, user: str = USER_ID, thread_ts: str | None = None,
    ts: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """An `app_mention`; "<@BOT_USER_ID> " is prefixed unless the text mentions the bot."""
    if f"<@{BOT_USER_ID}>" not in text:
        text = f"<@{BOT_USER_ID}> {text}"
    return user_message(
        text, channel=channel, user=user, thread_ts=thread_ts, ts=ts, kind="app_mention"
    )


def file_share(
    text: str, files: list[dict[str, Any]], *, user: str = USER_ID, channel: str = DM_CHANNEL,
) -> dict[str, Any]:  # fmt: skip
    """A message with files (`subtype: file_share`), as `message.im` delivers it."""
    event = user_message(text, channel=channel, user=user)
    return event | {"subtype": "file_share", "files": files, "upload": False,
                    "display_as_bot": False}  # fmt: skip


def bot_message(
    text: str, *, channel: str = CHANNEL, bot_id: str = BOT_ID, user: str | None = BOT_USER_ID,
    thread_ts: str | None = None, legacy: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """A bot's message. Apps posting with a bot token arrive with `user` + `bot_id` and no
    subtype (the default: this fake's own bot); `legacy=True` gives `subtype: bot_message`."""
    ts = next_ts()
    event: dict[str, Any] = {
        "type": "message", "text": text, "ts": ts, "bot_id": bot_id, "team": TEAM_ID,
        "channel": channel, "event_ts": ts, "channel_type": channel_type(channel),
    }  # fmt: skip
    if legacy:
        event |= {"subtype": "bot_message", "username": "legacy-bot"}
    else:
        app = APP_ID if bot_id == BOT_ID else "A0OTHERAPP"
        event |= {"user": user, "app_id": app, "bot_profile": {"id": bot_id, "team_id": TEAM_ID}}
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def _inner(original: dict[str, Any]) -> dict[str, Any]:
    keep = ("user", "bot_id", "text", "ts", "thread_ts", "team", "blocks")
    return {"type": "message"} | {k: original[k] for k in keep if k in original}


def message_changed(original: dict[str, Any], new_text: str) -> dict[str, Any]:
    """The `message_changed` event Slack sends when `original` is edited to `new_text`."""
    ts = next_ts()
    message = _inner(original) | {"text": new_text, "blocks": _rich_text(new_text)}
    message["edited"] = {"user": original.get("user", BOT_USER_ID), "ts": ts}
    return {
        "type": "message", "subtype": "message_changed", "message": message,
        "previous_message": _inner(original), "channel": original["channel"], "hidden": True,
        "ts": ts, "event_ts": ts, "channel_type": channel_type(original["channel"]),
    }  # fmt: skip


def message_deleted(original: dict[str, Any]) -> dict[str, Any]:
    """The `message_deleted` event for `original`."""
    ts = next_ts()
    return {
        "type": "message", "subtype": "message_deleted", "hidden": True,
        "deleted_ts": original["ts"], "channel": original["channel"],
        "previous_message": _inner(original), "ts": ts, "event_ts": ts,
        "channel_type": channel_type(original["channel"]),
    }  # fmt: skip


def event_callback(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """The Events API body around `event` (HTTP POST body / Socket Mode `payload`)."""
    authorization = {"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                     "is_bot": True, "is_enterprise_install": False}  # fmt: skip
    return {
        "token": "fake-verification-token", "team_id": TEAM_ID, "context_team_id": TEAM_ID,
        "context_enterprise_id": None, "api_app_id": APP_ID, "event": event,
        "type": "event_callback", "event_id": event_id, "event_time": int(time.time()),
        "authorizations": [authorization], "is_ext_shared_channel": False,
        "event_context": f"4-{uuid.uuid4().hex}",
    }  # fmt: skip


async def post_signed(
    url: str, payload: dict[str, Any], *, signing_secret: str, timestamp: int | None = None,
    bad_signature: bool = False, headers: dict[str, str] | None = None,
    session: aiohttp.ClientSession | None = None,
) -> tuple[int, str, float]:  # fmt: skip
    """POST `payload` as Slack does: JSON, X-Slack-Signature over `timestamp` (default now);
    `bad_signature` signs with a wrong secret. Returns (status, body, latency). With
    `session` the POST may reuse its open (keep-alive) connection; without, it opens
    a new one, and the latency includes the TCP connect."""
    body = json.dumps(payload)
    ts = int(time.time()) if timestamp is None else timestamp
    secret = signing_secret + "-wrong" if bad_signature else signing_secret
    all_headers = {
        "Content-Type": "application/json", "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": sign(secret, ts, body),
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    } | (headers or {})  # fmt: skip
    if session is None:
        async with aiohttp.ClientSession() as own:
            return await _post(own, url, body, all_headers)
    return await _post(session, url, body, all_headers)


async def _post(
    session: aiohttp.ClientSession, url: str, body: str, headers: dict[str, str]
) -> tuple[int, str, float]:
    started = time.monotonic()
    async with session.post(url, data=body.encode(), headers=headers) as response:
        return response.status, await response.text(), time.monotonic() - started


@dataclass(slots=True)
class Delivery:
    """One Socket Mode envelope the fake sent, and its ack."""

    envelope_id: str
    event_id: str
    retry_attempt: int
    sent_at: float
    acked_at: float | None = None
    ack: dict[str, Any] | None = None

    @property
    def latency(self) -> float | None:
        return None if self.acked_at is None else self.acked_at - self.sent_at

    @property
    def late(self) -> bool:
        """Slack would retry it: no ack within ACK_DEADLINE."""
        return self.latency is None or self.latency > ACK_DEADLINE


# -- Web API records and checks -----------------------------------------------
@dataclass(slots=True)
class StoredMessage:
    """One message as a Slack client shows it now (after edits / stream appends)."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    bot_id: str | None = None
    edits: int = 0
    appends: int = 0  # chat.appendStream calls
    streaming: bool = False
    recipient: str | None = None  # postEphemeral's user / a stream's recipient_user_id
    created_at: float = field(default_factory=time.monotonic)
    updated_at: float | None = None  # last accepted chat.update

    @property
    def from_bot(self) -> bool:
        return self.user == BOT_USER_ID

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "message", "user": self.user, "text": self.text,
                                "ts": self.ts, "team": TEAM_ID}  # fmt: skip
        if self.blocks:
            data["blocks"] = self.blocks
        if self.bot_id:
            profile = {"id": self.bot_id, "name": BOT_NAME, "team_id": TEAM_ID}
            data |= {"bot_id": self.bot_id, "app_id": APP_ID, "bot_profile": profile}
        if self.thread_ts:
            data["thread_ts"] = self.thread_ts
        if self.edits:
            data["edited"] = {"user": self.user, "ts": self.ts}
        return data


class ApiError(Exception):
    """A Web API refusal: HTTP `status` (200 as Slack does, 429 for ratelimited)."""

    def __init__(
        self, error: str, *, status: int = 200, headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:  # fmt: skip
        super().__init__(error)
        self.error, self.status, self.headers, self.extra = error, status, headers or {}, extra


def check_content(p: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(text to show, blocks) of a chat.postMessage/update; the text falls back to blocks'."""
    text = str(p.get("text") or "")
    blocks = check_blocks(p.get("blocks") or [])
    if not text and not blocks and not p.get("attachments"):
        raise ApiError("no_text")
    if len(text) > MAX_TEXT:
        raise ApiError("msg_too_long")
    return text or _blocks_text(blocks), blocks


def check_blocks(blocks: Any) -> list[dict[str, Any]]:
    if isinstance(blocks, str):  # form-encoded calls send blocks as a JSON string
        try:
            blocks = json.loads(blocks)
        except ValueError:
            raise ApiError("invalid_blocks_format") from None
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise ApiError("invalid_blocks_format")
    errors, markdown = [], 0
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"must be less than {MAX_BLOCKS + 1} items [json-pointer:/blocks]")
    for i, block in enumerate(blocks):
        if block.get("type") == "markdown":  # the 12,000 limit is cumulative
            markdown += len(str(block.get("text", "")))
            if markdown > MAX_MARKDOWN:
                errors.append(f"markdown exceeds {MAX_MARKDOWN} chars [json-pointer:/blocks/{i}]")
        elif block.get("type") == "section":
            if len(str((block.get("text") or {}).get("text", ""))) > MAX_SECTION:
                where = f"[json-pointer:/blocks/{i}/text/text]"
                errors.append(f"must be less than {MAX_SECTION + 1} characters {where}")
    if errors:
        messages = [f"[ERROR] {e}" for e in errors]
        raise ApiError("invalid_blocks", errors=errors, response_metadata={"messages": messages})
    return blocks


def _blocks_text(blocks: list[dict[str, Any]]) -> str:
    texts = [b.get("text") for b in blocks]
    parts = [t if isinstance(t, str) else (t or {}).get("text", "") for t in texts]
    return "\n".join(p for p in parts if p)


def stream_text(p: dict[str, Any]) -> str:
    """The markdown a chat.*Stream call adds: `markdown_text` plus markdown_text chunks.
    Over 12,000 chars → msg_too_long (the limit is documented, the error code a guess)."""
    chunks = p.get("chunks") or []
    chunks = json.loads(chunks) if isinstance(chunks, str) else chunks
    text = str(p.get("markdown_text") or "")
    text += "".join(str(c.get("text", "")) for c in chunks if c.get("type") == "markdown_text")
    if len(text) > MAX_MARKDOWN:
        raise ApiError("msg_too_long")
    return text


def user_json(user_id: str, *, bot: bool = False) -> dict[str, Any]:
    """A users.info `user` object."""
    name = BOT_NAME if bot else user_id.removeprefix("U0").lower()
    profile: dict[str, Any] = {"real_name": name.title(), "display_name": name}
    if bot:
        profile |= {"bot_id": BOT_ID, "api_app_id": APP_ID}
    return {
        "id": user_id, "team_id": TEAM_ID, "name": name, "deleted": False,
        "real_name": name.title(), "tz": "Europe/Berlin", "tz_offset": 3600, "is_bot": bot,
        "is_admin": False, "profile": profile,
    }  # fmt: skip


def conversation_json(channel: str, user: str | None = None) -> dict[str, Any]:
    """A conversations.info `channel` object (an im names its `user`)."""
    kind = channel_type(channel)
    if kind == "im":
        return {"id": channel, "created": 1700000000, "is_im": True, "is_org_shared": False,
                "user": user or USER_ID, "is_user_deleted": False, "priority": 0}  # fmt: skip
    return {
        "id": channel, "name": channel.lower(), "created": 1700000000,
        "is_channel": kind == "channel", "is_group": kind == "group", "is_im": False,
        "is_mpim": False, "is_private": kind == "group", "is_archived": False, "is_member": True,
    }  # fmt: skip
