"""The `Outbox` for one Slack reply: `chat.postMessage` in the thread, `chat.update`,
and for thread replies a native stream (`live_preview`, see `_stream`).

A `SentMessage` is `"channel:ts"`, so an outbox rebuilt after a restart
edits the same message (a stream's message included).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.core.models import Attachment
from chatbridge.core.ports import (
    ByteSink,
    DeliveryError,
    DeliveryRetry,
    FetchFailed,
    Found,
    PlatformLimits,
    SentMessage,
)
from chatbridge.platforms._deliver import Delivery, FormattingRefused
from chatbridge.platforms._look_back import LOOK_LIMIT, judge
from chatbridge.platforms._runtime import ChatGate, one_line

from ._files import SlackFiles
from ._filters import Address, SlackThreads
from ._format import MrkdwnRenderer
from ._stream import SlackStream, StreamSwitch

__all__ = [
    "MAX_CHARS",
    "STATUS",
    "SlackOutbox",
    "StatusSwitch",
    "parse_sent_message",
    "sent_message",
    "slack_delivery",
]

log = logging.getLogger(__name__)

# Slack takes 40,000 chars per message but folds long ones behind "show more"
# and renders mrkdwn past a few thousand poorly; the shared delivery code
# splits answers at this many (code fences kept balanced).
MAX_CHARS = 3_500
STATUS = "is thinking…"
STATUS_REFRESH = 60.0  # Slack clears a status after ~2 min without a reply
_T = TypeVar("_T")
_REFUSED_FORMAT = frozenset({"invalid_blocks", "invalid_blocks_format"})


def sent_message(channel: str, ts: str) -> SentMessage:
    return f"{channel}:{ts}"


def parse_sent_message(sent: SentMessage) -> tuple[str, str]:
    channel, _, ts = sent.partition(":")
    if not channel or not ts:
        raise DeliveryError(f"slack chat.update: not a sent message {sent!r}")
    return channel, ts


def classify(exc: Exception, what: str) -> BaseException | None:
    """Slack's error table (`Delivery`): 429 `ratelimited` -> `DeliveryRetry`,
    blocks refused -> `FormattingRefused`, any other API error -> `DeliveryError`
    with Slack's error code."""
    if not isinstance(exc, SlackApiError):
        return None
    error = _error(exc)
    if getattr(exc.response, "status_code", None) == 429 or error == "ratelimited":
        return DeliveryRetry(_retry_after(exc))
    if error in _REFUSED_FORMAT:
        return FormattingRefused()
    return DeliveryError(f"{what}: {error}")


def slack_delivery(gate: ChatGate | None = None) -> Delivery:
    """The app's one `Delivery`: `gate` shared by every reply's outbox."""
    return Delivery("slack", classify, gate=gate or ChatGate())


class StatusSwitch:
    """Whether `assistant.threads.setStatus` is worth calling (scope granted);
    turned off for good at the first `missing_scope`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled


class SlackOutbox:
    """Sends one answer into the DM or channel thread the question came from.

    Error contract, per call:
    - 429 `ratelimited` -> `DeliveryRetry(Retry-After)`; nothing was sent, and
      every later call into this channel (any reply's) waits until then;
    - blocks/formatting refused -> the same call repeated as plain text;
    - any other failure, Slack's or the SDK's (malformed replies included)
      -> `DeliveryError`.
    `typing()` sets the thread's "is thinking…" status where the app has the
    `assistant:write` scope, and never raises.

    A thread reply (`address.thread_ts` set) offers a native stream
    (`live_preview`) where `streams` allows it; in a channel the stream names
    `recipient_user` (the asker) and `team` as Slack requires.

    `posted_before` (`PostedLookup`) reads the thread (`conversations.replies`)
    or the DM's top level (`conversations.history`) after the question, where
    an earlier process may have answered (`look_back`: the question was not
    taken in by this process), and finds the bot's (`me`) own message posted
    for this answer.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        address: Address,
        *,
        edit_interval: float = 1.0,
        renderer: MrkdwnRenderer,
        delivery: Delivery,
        status: StatusSwitch,
        threads: SlackThreads,
        streams: StreamSwitch | None = None,
        recipient_user: str = "",
        team: str = "",
        me: str = "",
        look_back: bool = False,
        files: SlackFiles | None = None,
    ) -> None:
        self.limits = PlatformLimits(
            max_chars=MAX_CHARS, edit_interval=edit_interval, typing_interval=STATUS_REFRESH
        )
        self._client = client
        self._address = address
        self._renderer = renderer
        self._delivery = delivery
        self._status = status
        self._threads = threads
        self._streams = streams
        self._recipient_user = recipient_user
        self._team = team
        self._me = me
        self._look_back = look_back
        self._files = files

    async def fetch_file(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        """`core.ports.FileSource`: the file from `url_private_download`, capped."""
        if self._files is None:
            raise FetchFailed("slack: this outbox cannot fetch files")
        return await self._files.fetch(attachment, limit=limit, sink=sink)

    async def send(self, text: str) -> SentMessage:
        channel, thread_ts = self._address.channel, self._address.thread_ts or None

        async def call(body: str) -> SentMessage:
            response = await self._client.chat_postMessage(
                channel=channel, text=body, thread_ts=thread_ts, unfurl_links=False
            )
            return sent_message(_field(response, "channel", channel), _field(response, "ts"))

        sent = await self._deliver("chat.postMessage", channel, text, call)
        if thread_ts and not channel.startswith("D"):
            self._threads.add((channel, thread_ts))
        return sent

    async def edit(self, message: SentMessage, text: str) -> None:
        channel, ts = parse_sent_message(message)

        async def call(body: str) -> None:
            response = await self._client.chat_update(channel=channel, ts=ts, text=body)
            _field(response, "ts")

        await self._deliver("chat.update", channel, text, call)

    async def posted_before(self, text: str, *, after: SentMessage | None) -> Found:
        address = self._address
        asked = _ts_key(address.ts)
        if not (self._look_back and self._me and asked):
            return Found()
        oldest = address.ts
        if after is not None:
            with contextlib.suppress(DeliveryError):
                oldest = parse_sent_message(after)[1]
        try:
            messages = await self._read_after(oldest)
        except DeliveryError as exc:
            log.warning(
                "slack: could not look for an answer posted before the restart (%s); "
                "it may show twice",
                exc,
            )
            return Found()
        candidates = [text]
        with contextlib.suppress(ValueError):
            candidates.append(self._renderer.render(text))
        after_key = _ts_key(oldest) or asked
        mine = [
            (sent_message(address.channel, ts), body)
            for message in sorted(messages, key=lambda m: _ts_key(m.get("ts")) or (0, 0))
            if message.get("user") == self._me
            and isinstance(ts := message.get("ts"), str)
            and isinstance(body := message.get("text"), str)
            and (_ts_key(ts) or (0, 0)) > after_key
        ]
        return judge(mine, candidates)

    async def _read_after(self, oldest: str) -> list[dict[str, Any]]:
        """The messages after `oldest` where this answer goes (one page; a 429 waited out)."""
        channel, thread_ts = self._address.channel, self._address.thread_ts
        method = "conversations.replies" if thread_ts else "conversations.history"

        async def call() -> Any:
            if thread_ts:
                return await self._client.conversations_replies(
                    channel=channel, ts=thread_ts, oldest=oldest, limit=LOOK_LIMIT
                )
            return await self._client.conversations_history(
                channel=channel, oldest=oldest, limit=LOOK_LIMIT
            )

        for attempt in range(3):
            try:
                response = await self._delivery.call(method, channel, call)
                break
            except DeliveryRetry as exc:
                if attempt == 2:
                    raise
                await asyncio.sleep(min(exc.retry_after, 30.0))
        messages = response.get("messages") if hasattr(response, "get") else None
        if not isinstance(messages, list):
            raise DeliveryError(f"slack {method}: the reply has no messages")
        return [m for m in messages if isinstance(m, dict)]

    def live_preview(self) -> SlackStream | None:
        """A native stream for a thread reply where streams are on, else None."""
        channel, thread_ts = self._address.channel, self._address.thread_ts
        if not thread_ts or self._streams is None or not self._streams.allows(channel):
            return None
        recipient: dict[str, str] = {}
        if not channel.startswith("D"):  # channels need both; DMs need neither
            if not (self._recipient_user and self._team):
                return None
            recipient = {"recipient_user_id": self._recipient_user,
                         "recipient_team_id": self._team}  # fmt: skip
            self._threads.add((channel, thread_ts))  # follow-ups there need no mention
        return SlackStream(
            self._client,
            self._delivery,
            channel=channel,
            thread_ts=thread_ts,
            recipient=recipient,
            switch=self._streams,
        )

    async def typing(self) -> None:
        if not self._status.enabled:
            return
        address = self._address
        try:
            await self._client.assistant_threads_setStatus(
                channel_id=address.channel,
                thread_ts=address.thread_ts or address.ts,
                status=STATUS,
            )
        except SlackApiError as exc:
            if exc.response.get("error") == "missing_scope":
                self._status.enabled = False
                log.info("slack: no assistant:write scope; 'is thinking…' status turned off")
            else:
                log.debug("slack: setStatus failed: %s", one_line(exc))
        except Exception as exc:
            log.debug("slack: setStatus failed: %s", one_line(exc))

    async def _deliver(
        self, method: str, channel: str, text: str, call: Callable[[str], Awaitable[_T]]
    ) -> _T:
        """`call` with the text as mrkdwn, resent plain if Slack refuses the blocks."""
        try:
            body = self._renderer.render(text)
        except ValueError as exc:
            log.warning("slack %s: %s; sending plain text", method, exc)
            return await self._delivery.send(method, channel, call, text)
        return await self._delivery.send(method, channel, call, body, text)


def _error(exc: SlackApiError) -> str:
    try:
        return str(exc.response.get("error") or "unknown_error")
    except Exception:
        return "unknown_error"


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


def _ts_key(ts: object) -> tuple[int, int] | None:
    """A message `ts` ("seconds.micros") as numbers to order by; None if it is none."""
    if not isinstance(ts, str):
        return None
    seconds, _, micros = ts.partition(".")
    if not (seconds.isdigit() and (micros.isdigit() or not micros)):
        return None
    return int(seconds), int(micros or 0)


def _field(response: Any, key: str, default: str | None = None) -> str:
    """`response[key]` as a non-empty str; a malformed reply raises (-> DeliveryError)."""
    value = response.get(key, default) if hasattr(response, "get") else default
    if not isinstance(value, str) or not value:
        raise DeliveryError(f"slack: the reply has no {key!r}")
    return value
