"""Slack's native message streams (`chat.startStream` / `appendStream` /
`stopStream`) as an appending `LivePreview`.

A stream is a thread reply (a channel mention's thread, an assistant thread
in a DM); a plain DM answer has no thread and keeps `chat.update`. The shared
delivery code streams the first message of an answer this way while the
answer fits it, then stops the stream; from there the message is an ordinary
one (`chat.update` on its ts), and further messages are posted as usual.
Calls carry `markdown_text` (Markdown as the model wrote it, which Slack
renders), at most `MAX_STREAM_CHARS` per call.

Refusals: a `chat.startStream` error turns streams off for that channel
(logged once); one that says the app cannot use the method at all turns them
off everywhere (logged once). A stream that stops taking appends mid-way
(`message_not_in_streaming_state`, e.g. after Slack's ~5 minutes) ends this
reply's stream only: the message is then finished with `chat.update`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.core.ports import DeliveryError, DeliveryRetry, SentMessage
from chatbridge.platforms._deliver import Delivery

__all__ = ["MAX_STREAM_CHARS", "SlackStream", "StreamSwitch"]

log = logging.getLogger(__name__)

MAX_STREAM_CHARS = 12_000  # markdown_text per chat.*Stream call
# startStream errors that no other channel would answer differently.
_APP_WIDE = frozenset({"unknown_method", "missing_scope", "not_allowed_token_type", "not_allowed"})


class StreamSwitch:
    """Where native streams are used: everywhere unless `native_stream` is false;
    no longer in a channel whose `chat.startStream` was refused; nowhere once
    the app may not use streams at all. Each change is logged once and lasts
    until the process restarts."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._refused: set[str] = set()

    def allows(self, channel: str) -> bool:
        return self.enabled and channel not in self._refused

    def refuse(self, channel: str, error: str) -> None:
        if error in _APP_WIDE:
            if self.enabled:
                self.enabled = False
                log.warning(
                    "slack: chat.startStream refused (%s); answers stream with chat.update",
                    error,
                )
        elif channel not in self._refused:
            self._refused.add(channel)
            log.warning(
                "slack: chat.startStream refused in %s (%s); answers there stream with chat.update",
                channel,
                error,
            )


class SlackStream:
    """The native stream of one thread reply; `show` appends what is new."""

    appends = True

    def __init__(
        self,
        client: AsyncWebClient,
        delivery: Delivery,
        *,
        channel: str,
        thread_ts: str,
        recipient: dict[str, str],
        switch: StreamSwitch,
    ) -> None:
        self._client = client
        self._delivery = delivery
        self._channel = channel
        self._thread_ts = thread_ts
        self._recipient = recipient  # recipient_user_id / recipient_team_id in channels
        self._switch = switch
        self._ts: str | None = None
        self._shown = ""  # what the stream's message shows so far

    @property
    def message(self) -> SentMessage | None:
        return None if self._ts is None else f"{self._channel}:{self._ts}"

    async def show(self, text: str) -> None:
        if not text.startswith(self._shown):
            raise DeliveryError("slack chat.appendStream: the text no longer extends the stream")
        if self._ts is None:
            await self._start(text[:MAX_STREAM_CHARS])
        await self._append(text[len(self._shown) :])

    async def end(self, text: str) -> bool:
        """Stop the stream with what `text` adds; False (stopped as it stands) when
        `text` does not extend it or is past one call, or Slack refused."""
        if self._ts is None:
            return False
        ts, rest = self._ts, text[len(self._shown) :]
        extends = text.startswith(self._shown) and len(rest) <= MAX_STREAM_CHARS

        async def stop() -> Any:
            return await self._client.chat_stopStream(
                channel=self._channel, ts=ts, markdown_text=(rest if extends and rest else None)
            )

        try:
            await self._delivery.call("chat.stopStream", self._channel, stop)
        except DeliveryRetry:
            raise
        except DeliveryError as exc:
            log.info("slack: %s; the message is finished with chat.update", exc)
            return False
        if extends:
            self._shown = text
        return extends

    async def _start(self, first: str) -> None:
        async def start() -> Any:
            return await self._client.chat_startStream(
                channel=self._channel,
                thread_ts=self._thread_ts,
                markdown_text=first,
                recipient_user_id=self._recipient.get("recipient_user_id"),
                recipient_team_id=self._recipient.get("recipient_team_id"),
            )

        try:
            response = await self._delivery.call("chat.startStream", self._channel, start)
        except DeliveryRetry:
            raise
        except DeliveryError as exc:
            cause = exc.__cause__
            error = cause.response.get("error") if isinstance(cause, SlackApiError) else None
            self._switch.refuse(self._channel, str(error or exc))
            raise
        ts = response.get("ts") if hasattr(response, "get") else None
        if not isinstance(ts, str) or not ts:
            raise DeliveryError("slack chat.startStream: the reply has no 'ts'")
        self._ts, self._shown = ts, first

    async def _append(self, delta: str) -> None:
        ts = self._ts
        assert ts is not None
        while delta:
            piece, delta = delta[:MAX_STREAM_CHARS], delta[MAX_STREAM_CHARS:]

            async def append(piece: str = piece) -> Any:
                return await self._client.chat_appendStream(
                    channel=self._channel, ts=ts, markdown_text=piece
                )

            try:
                await self._delivery.call("chat.appendStream", self._channel, append)
            except DeliveryRetry:
                raise
            except DeliveryError:
                # Leave no message in streaming state behind for chat.update.
                with contextlib.suppress(DeliveryError):
                    await self._delivery.call(
                        "chat.stopStream",
                        self._channel,
                        lambda: self._client.chat_stopStream(channel=self._channel, ts=ts),
                    )
                raise
            self._shown += piece
