"""A fake Slack for tests: Web API, Socket Mode and HTTP Events API on 127.0.0.1, port 0.

It imitates what the real `slack_sdk` / `slack_bolt` see on the wire, so they run
unpatched against it: `AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url)`,
and `AsyncSocketModeHandler(app, APP_TOKEN)`, whose client calls
`apps.connections.open`, gets a single-use ws:// URL on this server, receives
`hello`, `events_api` envelopes and `disconnect` frames, and acks envelopes.
Web API answers are HTTP 200 `{"ok": false, "error": …}` like Slack's, except
429 `ratelimited` with `Retry-After`. Per channel it keeps the messages a Slack
client would show (current text, blocks, thread, edits, streaming state);
delivered events enter that transcript too, and `conversations.history` /
`conversations.replies` read it back (window, limit, cursor as Slack pages).
Every Web API call is recorded in `calls`, every envelope and its ack in
`deliveries`.

Always enforced: text > 40,000 chars `msg_too_long`; markdown blocks > 12,000
chars in total, a section text > 3,000 or > 50 blocks `invalid_blocks`; stream
calls over 12,000 chars; appends after `stream_ttl` s
`message_not_in_streaming_state`; channel streams need recipient ids. Fault
knobs: `rate_limit_next`, `throttle_updates`, `deny_scope` / `scopes`,
`refuse_streams` (chat.startStream answers an error), `stream_appends`
(streams leave streaming state after that many appends), `disconnect_sockets`,
`drop_sockets`. Ids, builders and checks live in
`fake_slack_events`. Imports nothing from the project.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tests.support import fake_slack_events as ev
from tests.support.fake_slack_events import ApiError, Delivery, StoredMessage

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-test-app-token"

_NEEDS = {
    "assistant.threads.setStatus": "assistant:write", "users.info": "users:read",
    "conversations.info": "channels:read,groups:read,mpim:read,im:read",
    "conversations.history": "channels:history,groups:history,im:history,mpim:history",
    "conversations.replies": "channels:history,groups:history,im:history,mpim:history",
}  # fmt: skip
_APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
_CHANNEL_ID = re.compile(r"^[CDG][A-Z0-9]{2,}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() on arrival
    error: str | None = None  # the `error` answered; None when ok


class FakeSlack:
    """The fake server; use as `async with FakeSlack() as fake:`."""

    def __init__(
        self, *, bot_token: str = BOT_TOKEN, app_token: str = APP_TOKEN,
        scopes: frozenset[str] | set[str] = ev.DEFAULT_SCOPES,
    ) -> None:  # fmt: skip
        self.bot_token, self.app_token = bot_token, app_token
        self.scopes: set[str] = set(scopes)  # granted; auth.test's x-oauth-scopes
        self.calls: list[Call] = []
        self.deliveries: list[Delivery] = []
        self.statuses: list[tuple[str, str, str]] = []  # (channel, thread_ts, status)
        self.ephemerals: list[StoredMessage] = []
        self.deleted: list[StoredMessage] = []
        self.users = {ev.BOT_USER_ID: ev.user_json(ev.BOT_USER_ID, bot=True)}
        self.channels: dict[str, dict[str, Any]] = {}  # known ones: posted to or heard from
        self.stream_ttl = 300.0  # seconds a stream accepts appends
        self.stream_appends: int | None = None  # appends a stream accepts; None: no limit
        self._stream_refusal: str | None = None
        self.socket_connects = 0  # accepted Socket Mode connections, ever
        self._store: defaultdict[str, dict[str, StoredMessage]] = defaultdict(dict)
        self._rate_limits: defaultdict[str, list[int]] = defaultdict(list)
        self._denied: set[str] = set()
        self._update_interval: float | None = None
        self._sockets: list[tuple[web.WebSocketResponse, web.Request]] = []
        self._tickets: set[str] = set()
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._payloads: dict[str, dict[str, Any]] = {}
        self._event_ids = itertools.count(1)
        self.files: dict[str, tuple[bytes, str]] = {}  # file id -> (bytes, mimetype)
        self.downloads: list[str] = []  # file ids whose bytes were served
        self.fail_downloads = False  # url_private answers 500
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------
    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._dispatch)
        app.router.add_get("/link/", self._socket)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws, _ in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # -- test-side helpers -------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages(self, channel: str) -> list[StoredMessage]:
        """Everything in the channel (users' and the bot's, threads included), by ts."""
        return sorted(self._store[channel].values(), key=lambda m: float(m.ts))

    def message(self, channel: str, ts: str) -> StoredMessage | None:
        return self._store[channel].get(ts)

    def thread(self, channel: str, thread_ts: str) -> list[str]:
        """Current texts of the bot's replies in the thread `thread_ts`."""
        return [m.text for m in self.messages(channel) if m.from_bot and m.thread_ts == thread_ts]

    def bot_texts(self, channel: str) -> list[str]:
        return [m.text for m in self.messages(channel) if m.from_bot]

    @property
    def connected(self) -> int:
        """Open Socket Mode connections now."""
        return len(self._sockets)

    def rate_limit_next(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        """The next `times` calls of `method` get 429 ratelimited, `Retry-After: retry_after`."""
        self._rate_limits[method] += [retry_after] * times

    def throttle_updates(self, min_interval: float | None) -> None:
        """chat.update of a message within `min_interval` s of its last accepted update → 429."""
        self._update_interval = min_interval

    def refuse_streams(self, error: str | None = "feature_not_enabled") -> None:
        """Every later chat.startStream answers `error` (None: streams work again).
        Slack's code for a workspace without streams is not documented; any
        error must do."""
        self._stream_refusal = error

    def deny_scope(self, method: str) -> None:
        """`method` answers missing_scope (e.g. assistant.threads.setStatus without
        assistant:write). Taking a scope out of `scopes` hits every method needing it."""
        self._denied.add(method)

    async def wait_for(self, predicate: Callable[[], object], within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met within timeout")
            await asyncio.sleep(0.01)

    def event_payload(self, event: dict[str, Any], *, event_id: str | None = None) -> dict:
        """The `event_callback` body around `event`; a known event_id gives the same one."""
        if event_id in self._payloads:
            return self._payloads[event_id]
        payload = ev.event_callback(event, event_id or f"Ev0{next(self._event_ids):09d}")
        self._payloads[payload["event_id"]] = payload
        self._observe(event)
        return payload

    # -- files -------------------------------------------------------------
    def add_file(
        self, data: bytes, name: str, mimetype: str, *, reported_size: int | None = None,
        clip: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """A file object as `files[]` of a file_share event carries it; the bytes
        are behind `url_private(_download)`, which needs the bot token and files:read.
        `clip`: an audio clip recorded in Slack (`subtype: slack_audio`)."""
        file_id = f"F0{len(self.files) + 1:08d}"
        self.files[file_id] = (data, mimetype)
        url = f"http://127.0.0.1:{self.port}/files-pri/{ev.TEAM_ID}-{file_id}"
        size = len(data) if reported_size is None else reported_size
        obj: dict[str, Any] = {
            "id": file_id, "created": int(time.time()), "timestamp": int(time.time()),
            "name": name, "title": name, "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1], "pretty_type": mimetype, "user": ev.USER_ID,
            "mode": "hosted", "editable": False, "is_external": False, "size": size,
            "url_private": f"{url}/{name}", "url_private_download": f"{url}/download/{name}",
            "permalink": f"https://example.slack.com/files/{ev.USER_ID}/{file_id}/{name}",
        }  # fmt: skip
        if clip:
            obj |= {"subtype": "slack_audio", "transcription": {"status": "complete",
                    "locale": "de-DE", "preview": {"content": "…", "has_more": False}}}  # fmt: skip
        return obj

    async def _file(self, request: web.Request) -> web.Response:
        """Like Slack: without the bot token and files:read, the HTML login page (200)."""
        file_id = request.match_info["team_file"].partition("-")[2]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if token != self.bot_token or "files:read" not in self.scopes:
            page = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"
            return web.Response(text=page, content_type="text/html")
        if file_id not in self.files:
            return web.Response(status=404, text="file not found")
        if self.fail_downloads:
            return web.Response(status=500, text="internal error")
        self.downloads.append(file_id)
        data, mimetype = self.files[file_id]
        return web.Response(body=data, content_type=mimetype)

    # -- Socket Mode -------------------------------------------------------
    def user_message(self, event: dict[str, Any]) -> None:
        """Slack holds the message of `event`, but no delivery carried it (chatbridge was down)."""
        self._observe(event)

    async def socket_event(
        self, event: dict[str, Any], *, event_id: str | None = None, retry_attempt: int = 0,
        retry_reason: str = "", within: float = 30.0, require_ack: bool = True,
    ) -> Delivery:  # fmt: skip
        """Send an `events_api` envelope on the newest socket; return once it is acked.

        Pass an earlier delivery's `event_id` with `retry_attempt` ≥ 1 (reason e.g.
        "timeout") to redeliver as Slack does: new envelope_id, same payload. Raises
        AssertionError without a socket or an ack within `within` seconds; with
        `require_ack=False` the unacked Delivery is returned instead."""
        payload = self.event_payload(event, event_id=event_id)
        await self.wait_for(lambda: self._sockets, within)
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id, "payload": payload, "type": "events_api",
            "accepts_response_payload": False, "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }  # fmt: skip
        delivery = Delivery(envelope_id, payload["event_id"], retry_attempt, time.monotonic())
        self.deliveries.append(delivery)
        future = self._acks[envelope_id] = asyncio.get_running_loop().create_future()
        try:
            await self._sockets[-1][0].send_str(json.dumps(envelope))
            await asyncio.wait_for(future, within)
        except TimeoutError:
            if require_ack:
                raise AssertionError(f"envelope {envelope_id} not acked in {within}s") from None
        finally:
            self._acks.pop(envelope_id, None)
        return delivery

    async def disconnect_sockets(self, reason: str = "refresh_requested") -> None:
        """Send Slack's `disconnect` frame on every open socket (the client should reconnect)."""
        frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-applink"}}
        for ws, _ in list(self._sockets):
            await ws.send_json(frame)

    def drop_sockets(self) -> None:
        """Cut every socket's TCP connection without a close frame (a network failure)."""
        for _, request in list(self._sockets):
            if request.transport is not None:
                request.transport.abort()

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:  # one connection per apps.connections.open
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        entry = (ws, request)
        self._sockets.append(entry)
        self.socket_connects += 1
        try:
            await ws.send_json({
                "type": "hello", "num_connections": len(self._sockets),
                "debug_info": {"host": "fake-applink", "approximate_connection_time": 18060},
                "connection_info": {"app_id": ev.APP_ID},
            })  # fmt: skip
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    self._on_ack(json.loads(msg.data))
        except (ConnectionError, aiohttp.ClientError):
            pass
        finally:
            self._sockets.remove(entry)
        return ws

    def _on_ack(self, data: dict[str, Any]) -> None:
        envelope_id = str(data.get("envelope_id"))
        for delivery in self.deliveries:
            if delivery.envelope_id == envelope_id and delivery.acked_at is None:
                delivery.acked_at, delivery.ack = time.monotonic(), data
        future = self._acks.get(envelope_id)
        if future is not None and not future.done():
            future.set_result(data)

    # -- HTTP Events API ---------------------------------------------------
    async def post_event(
        self, url: str, event: dict[str, Any], *, signing_secret: str,
        event_id: str | None = None, retry_num: int | None = None,
        retry_reason: str = "http_timeout", timestamp: int | None = None,
        bad_signature: bool = False, session: aiohttp.ClientSession | None = None,
    ) -> tuple[int, str, float]:  # fmt: skip
        """POST an `event_callback` signed as Slack does; returns (status, body, latency).
        A retry (`retry_num` ≥ 1, with the first delivery's `event_id`) adds
        X-Slack-Retry-Num / X-Slack-Retry-Reason; `session` reuses its connections."""
        headers = {}
        if retry_num is not None:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
        payload = self.event_payload(event, event_id=event_id)
        return await self.post_signed(url, payload, signing_secret=signing_secret,
                                      timestamp=timestamp, bad_signature=bad_signature,
                                      headers=headers, session=session)  # fmt: skip

    async def post_url_verification(
        self, url: str, *, signing_secret: str, challenge: str = "fake-challenge"
    ) -> tuple[int, str, float]:
        payload = {"token": "fake-verification-token", "challenge": challenge,
                   "type": "url_verification"}  # fmt: skip
        return await self.post_signed(url, payload, signing_secret=signing_secret)

    async def post_signed(
        self, url: str, payload: dict[str, Any], *, signing_secret: str, **options: Any
    ) -> tuple[int, str, float]:
        """POST `payload` signed for `signing_secret`; see `fake_slack_events.post_signed`."""
        return await ev.post_signed(url, payload, signing_secret=signing_secret, **options)

    # -- Web API -----------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.Response:
        at, method = time.monotonic(), request.match_info["method"]
        params = await _params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() or str(params.pop("token", ""))
        headers: dict[str, str] = {}
        try:
            self._authorize(method, token)
            if token == self.bot_token:
                headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
            if self._rate_limits[method]:
                retry = self._rate_limits[method].pop(0)
                raise ApiError("ratelimited", status=429, headers={"Retry-After": str(retry)})
            needed = _NEEDS.get(method, "chat:write" if method.startswith("chat.") else "")
            if method in self._denied or (needed and not set(needed.split(",")) & self.scopes):
                provided = ",".join(sorted(self.scopes))
                raise ApiError("missing_scope", needed=needed or "unknown", provided=provided)
            handler = getattr(self, "_api_" + method.replace(".", "_"), None)
            if handler is None:
                raise ApiError("unknown_method")
            body, status, error = {"ok": True} | handler(params), 200, None
        except ApiError as exc:
            body = {"ok": False, "error": exc.error} | exc.extra
            status, error = exc.status, exc.error
            headers |= exc.headers
        self.calls.append(Call(method, params, at, error))
        return web.json_response(body, status=status, headers=headers)

    def _authorize(self, method: str, token: str) -> None:
        if not token:
            raise ApiError("not_authed")
        wanted = self.app_token if method in _APP_TOKEN_METHODS else self.bot_token
        if token != wanted:
            known = token in (self.app_token, self.bot_token)
            raise ApiError("not_allowed_token_type" if known else "invalid_auth")

    def _api_auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{ev.TEAM_DOMAIN}.slack.com/", "team": ev.TEAM_NAME,
            "user": ev.BOT_NAME, "team_id": ev.TEAM_ID, "user_id": ev.BOT_USER_ID,
            "bot_id": ev.BOT_ID, "is_enterprise_install": False,
        }  # fmt: skip

    def _api_apps_connections_open(self, _: dict[str, Any]) -> dict[str, Any]:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={ev.APP_ID}"}

    def _api_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(p)
        text, blocks = ev.check_content(p)
        message = self._add_bot_message(channel, text, blocks, p.get("thread_ts"))
        return {"channel": channel, "ts": message.ts, "message": message.to_json()}

    def _api_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._own_message(p, "cant_update_message")
        text, blocks = ev.check_content(p)
        now = time.monotonic()
        if self._update_interval is not None and message.updated_at is not None:
            wait = self._update_interval - (now - message.updated_at)
            if wait > 0:
                retry = {"Retry-After": str(max(1, math.ceil(wait)))}
                raise ApiError("ratelimited", status=429, headers=retry)
        message.text, message.blocks = text, blocks
        message.edits, message.updated_at = message.edits + 1, now
        ref = {"channel": message.channel, "ts": message.ts}
        return ref | {"text": text, "message": message.to_json()}

    def _api_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, user = self._channel(p), str(p.get("user", ""))
        if not _USER_ID.match(user):
            raise ApiError("user_not_found")
        text, blocks = ev.check_content(p)
        ephemeral = StoredMessage(channel, ev.next_ts(), ev.BOT_USER_ID, text, blocks,
                                  p.get("thread_ts"), ev.BOT_ID, recipient=user)  # fmt: skip
        self.ephemerals.append(ephemeral)
        return {"message_ts": ephemeral.ts}

    def _api_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._own_message(p, "cant_delete_message")
        self.deleted.append(self._store[message.channel].pop(message.ts))
        return {"channel": message.channel, "ts": message.ts}

    def _api_chat_startStream(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(p)
        if self._stream_refusal is not None:
            raise ApiError(self._stream_refusal)
        if not p.get("thread_ts"):
            raise ApiError("invalid_arguments")
        if ev.channel_type(channel) != "im":
            for key in ("recipient_user_id", "recipient_team_id"):
                if not p.get(key):
                    raise ApiError(f"missing_{key}")
        message = self._add_bot_message(channel, ev.stream_text(p), [], p["thread_ts"])
        message.streaming, message.recipient = True, p.get("recipient_user_id")
        return {"channel": channel, "ts": message.ts}

    def _api_chat_appendStream(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(p, appending=True)
        text = ev.stream_text(p)
        if not text:
            raise ApiError("no_text")
        message.text, message.appends = message.text + text, message.appends + 1
        return {"channel": message.channel, "ts": message.ts}

    def _api_chat_stopStream(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(p)
        message.text += ev.stream_text(p)
        if p.get("blocks"):
            message.blocks = ev.check_blocks(p["blocks"])
        message.streaming = False
        return {"channel": message.channel, "ts": message.ts, "message": message.to_json()}

    def _api_assistant_threads_setStatus(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(p, key="channel_id")
        self.statuses.append((channel, str(p.get("thread_ts", "")), str(p.get("status", ""))))
        return {}

    def _api_conversations_info(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = self.channels.get(str(p.get("channel", "")))
        if channel is None:
            raise ApiError("channel_not_found")
        return {"channel": channel}

    def _api_conversations_history(self, p: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages (thread replies only as their parents), newest first."""
        store = self._store[self._channel(p)]
        shown = [m for m in store.values() if not m.thread_ts or m.thread_ts == m.ts]
        return _page(sorted(shown, key=_ts_order, reverse=True), p)

    def _api_conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        """The thread's parent first, then its replies oldest first (the window
        `oldest`/`latest` applies to the replies; the parent always comes)."""
        store = self._store[self._channel(p)]
        parent = store.get(str(p.get("ts", "")))
        if parent is None:
            raise ApiError("thread_not_found")
        replies = sorted(
            (m for m in store.values() if m.thread_ts == parent.ts and m.ts != parent.ts),
            key=_ts_order,
        )
        page = _page(replies, p)
        page["messages"].insert(0, parent.to_json())
        return page

    def _api_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(p.get("user", "")))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user}

    # -- internals ---------------------------------------------------------
    def _channel(self, p: dict[str, Any], key: str = "channel") -> str:
        channel = str(p.get(key, ""))
        if not _CHANNEL_ID.match(channel):
            raise ApiError("channel_not_found")
        self.channels.setdefault(channel, ev.conversation_json(channel))
        return channel

    def _add_bot_message(
        self, channel: str, text: str, blocks: list[dict[str, Any]], thread_ts: str | None
    ) -> StoredMessage:
        message = StoredMessage(
            channel, ev.next_ts(), ev.BOT_USER_ID, text, blocks, thread_ts, ev.BOT_ID
        )
        self._store[channel][message.ts] = message
        return message

    def _own_message(self, p: dict[str, Any], refusal: str) -> StoredMessage:
        message = self._store[self._channel(p)].get(str(p.get("ts", "")))
        if message is None:
            raise ApiError("message_not_found")
        if not message.from_bot:
            raise ApiError(refusal)
        return message

    def _streaming(self, p: dict[str, Any], *, appending: bool = False) -> StoredMessage:
        message = self._own_message(p, "cant_update_message")
        spent = self.stream_appends is not None and message.appends >= self.stream_appends
        expired = time.monotonic() - message.created_at > self.stream_ttl
        if not message.streaming or expired or (spent and appending):
            message.streaming = False
            raise ApiError("message_not_in_streaming_state")
        return message

    def _observe(self, event: dict[str, Any]) -> None:
        """Enter what a delivered event shows into the transcript (Slack already has it)."""
        channel, subtype, user = event.get("channel"), event.get("subtype"), event.get("user")
        if not isinstance(channel, str):
            return
        self.channels.setdefault(channel, ev.conversation_json(channel, user))
        if user and user not in self.users:
            self.users[user] = ev.user_json(user)
        store = self._store[channel]
        if event.get("type") in ("message", "app_mention") and subtype in (None, "bot_message"):
            store.setdefault(event["ts"], StoredMessage(
                channel, event["ts"], user or "", event.get("text", ""), [],
                event.get("thread_ts"), event.get("bot_id"),
            ))  # fmt: skip
        elif subtype == "message_changed" and event["message"]["ts"] in store:
            stored = store[event["message"]["ts"]]
            stored.text, stored.edits = event["message"].get("text", ""), stored.edits + 1
        elif subtype == "message_deleted":
            store.pop(event.get("deleted_ts", ""), None)


def _ts_order(message: StoredMessage | str) -> tuple[int, int]:
    """A `ts` ("seconds.micros") as numbers; ValueError for anything else."""
    ts = message if isinstance(message, str) else message.ts
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros.ljust(6, "0") or 0)


def _page(messages: list[StoredMessage], p: dict[str, Any]) -> dict[str, Any]:
    """Slack's window and paging: `oldest`/`latest` exclusive unless `inclusive`,
    `limit` (default 100, at most 999), an opaque `cursor`, `has_more`."""
    inclusive = str(p.get("inclusive", "")).lower() in ("1", "true")

    def within(message: StoredMessage) -> bool:
        at = _ts_order(message)
        for bound, later in ((p.get("oldest"), True), (p.get("latest"), False)):
            if not bound:
                continue
            try:
                limit = _ts_order(str(bound))
            except ValueError:
                raise ApiError("invalid_arguments") from None
            if (at == limit and not inclusive) or (at < limit if later else at > limit):
                return False
        return True

    try:
        limit = min(max(int(p.get("limit") or 100), 1), 999)
        start = int(p.get("cursor") or 0)
    except ValueError:
        raise ApiError("invalid_cursor") from None
    shown = [m for m in messages if within(m)]
    chunk = shown[start : start + limit]
    more = start + limit < len(shown)
    return {
        "messages": [m.to_json() for m in chunk],
        "has_more": more,
        "response_metadata": {"next_cursor": str(start + limit) if more else ""},
    }


async def _params(request: web.Request) -> dict[str, Any]:
    """Query string plus a JSON or form body, as slack_sdk sends them."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.text()
        return params | (json.loads(body) if body else {})
    if request.method == "POST":
        params |= {k: str(v) for k, v in (await request.post()).items()}
    return params
