"""A fake Discord (REST API v10 + gateway) for tests: aiohttp on 127.0.0.1, port 0.

The real discord.py `Client` runs against it unchanged once `point_discord_at`
has redirected discord.py's two process-wide URLs (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`; discord.py has no per-client setting).
It keeps what Discord keeps: channels (guild text, DM, threads), per-channel
messages with their current content, edit history and reply reference, the
synced application commands, and interactions with their responses. Errors
come as Discord sends them: 401 for a wrong token, 404 Unknown Channel/Message
(10003/10008), 400 Invalid Form Body (50035) past 2000 characters, 403 for
editing someone else's message (50005), 40060 for a second interaction
response, 10062 for a first response after `interaction_deadline`. The bot's
own sends come back as MESSAGE_CREATE/MESSAGE_UPDATE, as on Discord. REST
calls are recorded in `calls`, gateway frames from the client in
`gateway_log`. Fault knobs: `rate_limit_next` (429, with or without `Via`),
`fail_next` (any status); gateway faults (drop, op 7, op 9, close codes) and
the event builders live in `fake_discord_gateway`. JSON responses carry
`Content-Type: application/json` exactly, as discord.py requires.

History: `GET /channels/{id}/messages` takes `limit` (1-100, default 50) and
one of `after`, `before`, `around`, and answers newest first as Discord
does (with `after`, the `limit` messages right after it; discord.py reverses
them). Message IDs are snowflakes of the fake's `clock` (wall time unless a
test sets it), so a test can mint messages that were sent long ago.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aiohttp import web

from tests.support.fake_discord_gateway import (
    APP_ID,
    BOT_ID,
    CHANNEL_ID,
    EPHEMERAL,
    GUILD_ID,
    GUILD_MEMBERS,
    GUILD_PRESENCES,
    LOADING,
    MESSAGE_CONTENT,
    PRIVILEGED_INTENTS,
    THREAD_ID,
    TOKEN,
    USER_ID,
    GatewayMixin,
    InteractionRecord,
    _iso,
)

__all__ = [
    "APP_ID", "BOT_ID", "CHANNEL_ID", "EPHEMERAL", "GUILD_ID", "MAX_CHARS", "THREAD_ID",
    "TOKEN", "USER_ID", "ApiError", "Call", "FakeDiscord", "InteractionRecord", "StoredMessage",
    "point_discord_at",
]  # fmt: skip

MAX_CHARS = 2000
_DISCORD_EPOCH_MS = 1420070400000
_COMMAND_NAME = re.compile(r"^[-_\w]{1,32}$")
_USER_MENTION = re.compile(r"<@!?(\d+)>")
_TRUE = ("1", "true", "True")


@dataclass(frozen=True, slots=True)
class Call:
    method: str  # "POST"; "WS" for gateway frames
    path: str  # relative to api_base ("/channels/1/messages"); the op name for gateway frames
    body: Any
    at: float  # time.monotonic()
    status: int = 0
    query: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class StoredMessage:
    """One message as the channel shows it now (after any edits)."""

    id: int
    channel_id: int
    author: dict[str, Any]
    content: str
    guild_id: int | None = None
    reference: int | None = None  # id of the message this one replies to
    flags: int = 0
    allowed_mentions: dict[str, Any] | None = None
    interaction_id: int | None = None
    edits: int = 0
    versions: list[str] = field(default_factory=list)  # content after every write
    edit_times: list[float] = field(default_factory=list)  # monotonic time of every edit
    timestamp: str = ""
    edited_timestamp: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)

    @property
    def by_bot(self) -> bool:
        return int(self.author["id"]) == BOT_ID


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.headers: dict[str, str] = {}
        self.body: dict[str, Any] = {"message": message, "code": code, **extra}


class _Req(NamedTuple):
    method: str
    body: Any
    query: dict[str, str]


def _form_error(name: str, code: str, message: str) -> ApiError:
    errors = {name: {"_errors": [{"code": code, "message": message}]}}
    return ApiError(400, 50035, "Invalid Form Body", errors=errors)


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json": aiohttp's json_response adds a charset, which discord.py rejects.
    headers = {**(headers or {}), "Content-Type": "application/json"}
    return web.Response(body=json.dumps(payload).encode(), status=status, headers=headers)


@contextlib.contextmanager
def point_discord_at(fake: FakeDiscord) -> Iterator[None]:
    """Redirect discord.py (process-wide) to `fake`; restores the URLs on exit.

    Unavoidable: discord.py reads `Route.BASE` when each request's Route is built
    and `DiscordWebSocket.DEFAULT_GATEWAY` on every fresh connect; neither can be
    set per client. Imported lazily so this module works without discord.py.
    """
    import discord.gateway
    import discord.http
    import yarl

    route, ws = discord.http.Route, discord.gateway.DiscordWebSocket
    saved = route.BASE, ws.DEFAULT_GATEWAY
    route.BASE, ws.DEFAULT_GATEWAY = fake.api_base, yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        route.BASE, ws.DEFAULT_GATEWAY = saved


class FakeDiscord(GatewayMixin):
    """The fake; use as `async with FakeDiscord() as fake:`.

    Knobs: `require_message_content` closes IDENTIFY with 4014 when the
    MESSAGE_CONTENT intent is not requested; `granted_intents` are the privileged
    intents switched on "in the developer portal" (asking for others → 4014;
    without MESSAGE_CONTENT guild messages arrive with empty content unless they
    mention the bot, as on Discord); `heartbeat_interval_ms`; `ack_heartbeats`;
    `zlib_stream`; `echo_bot_messages`; `interaction_deadline` (3 s on Discord);
    `default_guild` (GUILD_ID with CHANNEL_ID "general" and THREAD_ID in it).
    """

    def __init__(
        self,
        *,
        token: str = TOKEN,
        require_message_content: bool = False,
        granted_intents: int = PRIVILEGED_INTENTS,
        heartbeat_interval_ms: int = 41250,
        ack_heartbeats: bool = True,
        zlib_stream: bool = True,
        echo_bot_messages: bool = True,
        interaction_deadline: float = 3.0,
        default_guild: bool = True,
    ) -> None:
        self.token, self.granted_intents = token, granted_intents
        self.require_message_content = require_message_content
        self.heartbeat_interval_ms, self.ack_heartbeats = heartbeat_interval_ms, ack_heartbeats
        self.zlib_stream, self.echo_bot_messages = zlib_stream, echo_bot_messages
        self.interaction_deadline = interaction_deadline
        self.me = self.user(BOT_ID, "bridge-bot", bot=True)
        # Application flags for the privileged intents switched on (the "limited" variants).
        limited = ((MESSAGE_CONTENT, 1 << 19), (GUILD_MEMBERS, 1 << 15), (GUILD_PRESENCES, 1 << 13))
        flags = sum(bit for intent, bit in limited if granted_intents & intent)
        self.app: dict[str, Any] = {
            "id": str(APP_ID), "name": "Bridge", "icon": None, "description": "", "summary": "",
            "bot_public": True, "bot_require_code_grant": False, "verify_key": "ab" * 32,
            "owner": self.user(USER_ID, "alice"), "team": None, "flags": flags, "bot": self.me,
            "interactions_endpoint_url": None, "redirect_uris": [], "tags": [],
        }  # fmt: skip
        self.calls: list[Call] = []
        self.gateway_log: list[Call] = []
        self.guilds: dict[int, dict[str, Any]] = {}
        self.channels: dict[int, dict[str, Any]] = {}
        self.commands: list[dict[str, Any]] = []  # the global command set as Discord keeps it
        self.guild_commands: dict[int, list[dict[str, Any]]] = {}
        self.command_syncs: list[list[dict[str, Any]]] = []  # the body of every PUT, in order
        self.interactions: dict[int, InteractionRecord] = {}
        self.typing: list[int] = []  # channel ids, one per POST /typing
        self._messages: dict[int, dict[int, StoredMessage]] = {}
        self.cdn: dict[str, bytes] = {}  # attachment path -> bytes, served like Discord's CDN
        self.downloads: list[str] = []  # attachment paths whose bytes were served
        self.fail_downloads = False  # the CDN answers 404 (an expired signed URL)
        self._faults: list[dict[str, Any]] = []
        self._last_id = 0
        self.clock: Callable[[], float] = time.time  # the world's time for new snowflakes
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._init_gateway()
        if default_guild:
            general = {CHANNEL_ID: "general"}
            self.add_guild(GUILD_ID, "Test Guild", general, threads={THREAD_ID: CHANNEL_ID})

    # -- lifecycle ---------------------------------------------------------
    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gw", self._gateway)
        app.router.add_get("/gw/{tail:.*}", self._gateway)
        app.router.add_route("*", "/api/v{version:\\d+}/{tail:.*}", self._api)
        app.router.add_get("/attachments/{tail:.+}", self._cdn)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close_all()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    # -- attachments ---------------------------------------------------------
    def attachment(
        self,
        data: bytes,
        filename: str,
        content_type: str | None,
        *,
        voice: bool = False,
        reported_size: int | None = None,
    ) -> dict[str, Any]:
        """An attachment object as MESSAGE_CREATE carries it, its bytes on the
        fake CDN behind a signed, expiring URL (`?ex=…&is=…&hm=…`) as Discord's."""
        aid = self._snowflake()
        path = f"{CHANNEL_ID}/{aid}/{filename}"
        self.cdn[path] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{path}?ex=6790a1b2&is=678f5032&hm=abc123"
        data_json: dict[str, Any] = {
            "id": str(aid), "filename": filename, "size": len(data)
            if reported_size is None else reported_size, "url": url, "proxy_url": url,
        }  # fmt: skip
        if content_type is not None:
            data_json["content_type"] = content_type
        if voice:
            data_json |= {"duration_secs": 3.2, "waveform": "AAAA", "flags": 0}
        return data_json

    async def send_dm_files(
        self, content: str, attachments: list[dict[str, Any]], *, author: int = USER_ID
    ) -> dict[str, Any]:
        """A DM with attachments; a voice attachment makes it a voice message (flag 8192)."""
        voice = any("waveform" in a for a in attachments)
        data = self.user_message(self.dm_channel(author), content, author=author)
        stored = self._messages[int(data["channel_id"])][int(data["id"])]
        stored.attachments = list(attachments)
        stored.flags |= 8192 if voice else 0
        data = self._message_json(stored, gateway=True)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def _cdn(self, request: web.Request) -> web.Response:
        path = request.match_info["tail"]
        if path not in self.cdn or self.fail_downloads or "hm" not in request.query:
            return web.Response(status=404, text="This content is no longer available.")
        self.downloads.append(path)
        return web.Response(body=self.cdn[path], content_type="application/octet-stream")

    # -- test-side helpers -------------------------------------------------
    def calls_to(self, pattern: str) -> list[Call]:
        """REST calls whose "METHOD /path" matches the fnmatch `pattern`."""
        return [c for c in self.calls if fnmatch.fnmatchcase(f"{c.method} {c.path}", pattern)]

    def channel_messages(self, channel_id: int) -> list[StoredMessage]:
        return list(self._messages.get(channel_id, {}).values())

    def bot_messages(self, channel_id: int | None = None) -> list[StoredMessage]:
        chans = [channel_id] if channel_id is not None else list(self._messages)
        return [m for c in chans for m in self.channel_messages(c) if m.by_bot]

    def bot_texts(self, channel_id: int | None = None) -> list[str]:
        """The transcript as users see it: the bot's messages, current content."""
        return [m.content for m in self.bot_messages(channel_id)]

    def fast_edits(self, min_gap: float) -> int:
        """Edit-throttle detector: PATCHes of a message within `min_gap` s of its previous one."""
        pairs = (p for m in self.bot_messages() for p in itertools.pairwise(m.edit_times))
        return sum(b - a < min_gap for a, b in pairs)

    async def wait_for(self, predicate: Callable[[], object], within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met within timeout")
            await asyncio.sleep(0.01)

    def rate_limit_next(
        self, route_pattern: str, retry_after: float = 0.5, times: int = 1, *,
        via: bool = True, is_global: bool = False,
    ) -> None:  # fmt: skip
        """The next `times` calls matching `route_pattern` ("PATCH /channels/*/messages/*")
        answer 429 as Discord does. discord.py retries only when `Via` is present (a
        Cloudflare ban has none); without it raises HTTPException(status=429) at once."""
        headers = {
            "Retry-After": str(max(1, round(retry_after))), "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}", "X-RateLimit-Bucket": "fakebucket",
            "X-RateLimit-Scope": "global" if is_global else "user",
        }  # fmt: skip
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        if via:
            headers["Via"] = "1.1 google"
        body = {"message": "You are being rate limited.", "retry_after": retry_after,
                "global": is_global, "code": 0}  # fmt: skip
        fault = {"pattern": route_pattern, "status": 429, "body": body, "headers": headers}
        self._faults += [fault] * times

    def fail_next(
        self, route_pattern: str, status: int = 500, *, code: int = 0,
        message: str = "Internal Server Error", times: int = 1,
    ) -> None:  # fmt: skip
        """The next `times` matching calls answer `status` (discord.py retries 500/502/504
        after 1 + 2n s; 403 raises Forbidden, 404 NotFound)."""
        body = {"message": message, "code": code}
        fault = {"pattern": route_pattern, "status": status, "body": body, "headers": {}}
        self._faults += [fault] * times

    # -- REST --------------------------------------------------------------
    _ROUTES: tuple[tuple[str, str, str], ...] = (
        ("GET", r"/users/@me", "me"),
        ("GET", r"/oauth2/applications/@me", "application"),
        ("GET", r"/gateway(?P<bot>/bot)?", "gateway_info"),
        ("POST", r"/users/@me/channels", "open_dm"),
        ("GET", r"/channels/(?P<cid>\d+)", "get_channel"),
        ("POST", r"/channels/(?P<cid>\d+)/messages", "post_message"),
        ("GET", r"/channels/(?P<cid>\d+)/messages", "list_messages"),
        ("GET", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "get_message"),
        ("PATCH", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "edit_message"),
        ("DELETE", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "delete_message"),
        ("POST", r"/channels/(?P<cid>\d+)/typing", "typing_"),
        ("POST", r"/channels/(?P<cid>\d+)(?:/messages/(?P<mid>\d+))?/threads", "thread"),
        ("GET", r"/applications/(?P<app>\d+)(?:/guilds/(?P<gid>\d+))?/commands", "get_commands"),
        ("PUT", r"/applications/(?P<app>\d+)(?:/guilds/(?P<gid>\d+))?/commands", "put_commands"),
        # Interaction responses use the interaction token, not the bot token.
        ("POST", r"/interactions/(?P<iid>\d+)/(?P<tok>[^/]+)/callback", "callback"),
        ("POST", r"/webhooks/(?P<app>\d+)/(?P<tok>[^/]+)", "followup"),
        ("*", r"/webhooks/(?P<app>\d+)/(?P<tok>[^/]+)/messages/(?P<mid>@original|\d+)", "webhook"),
    )

    async def _api(self, request: web.Request) -> web.Response:
        path, method = "/" + request.match_info["tail"], request.method
        body: Any = None
        if request.content_type.startswith("multipart/"):  # files: the JSON is a form field
            body = json.loads(str((await request.post()).get("payload_json") or "{}"))
        elif (raw := await request.read()) and request.content_type == "application/json":
            body = json.loads(raw)
        status, payload, headers = 200, None, {}
        try:
            name, groups = self._route(method, path)
            bot_auth = request.headers.get("Authorization") == f"Bot {self.token}"
            if not bot_auth and name not in ("callback", "followup", "webhook"):
                raise ApiError(401, 0, "401: Unauthorized")
            for fault in self._faults:
                if fnmatch.fnmatchcase(f"{method} {path}", fault["pattern"]):
                    self._faults.remove(fault)
                    exc = ApiError(fault["status"], 0, "")
                    exc.body, exc.headers = fault["body"], fault["headers"]
                    raise exc
            req = _Req(method, body if body is not None else {}, dict(request.query))
            payload = await getattr(self, f"_api_{name}")(req, **groups)
            status = 204 if payload is None else 200
        except ApiError as exc:
            status, payload, headers = exc.status, exc.body, exc.headers
        self.calls.append(Call(method, path, body, time.monotonic(), status, dict(request.query)))
        return web.Response(status=204) if status == 204 else _json(payload, status, headers)

    def _route(self, method: str, path: str) -> tuple[str, dict[str, str]]:
        for verb, pattern, name in self._ROUTES:
            match = re.fullmatch(pattern, path)
            if match and verb in (method, "*"):
                return name, {k: v for k, v in match.groupdict().items() if v is not None}
        raise ApiError(404, 0, "404: Not Found")

    async def _api_me(self, _: _Req) -> dict[str, Any]:
        return self.me | {"verified": True, "mfa_enabled": False, "email": None, "locale": "en-US"}

    async def _api_application(self, _: _Req) -> dict[str, Any]:
        return self.app

    async def _api_gateway_info(self, _: _Req, bot: str = "") -> dict[str, Any]:
        if not bot:
            return {"url": self.gateway_url}
        limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
        return {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    async def _api_open_dm(self, r: _Req) -> dict[str, Any]:
        return self.channels[self.dm_channel(int(r.body["recipient_id"]))]

    async def _api_get_channel(self, _: _Req, cid: str) -> dict[str, Any]:
        return self._channel(cid)

    async def _api_typing_(self, _: _Req, cid: str) -> None:
        self._channel(cid)
        self.typing.append(int(cid))

    async def _api_get_message(self, _: _Req, cid: str, mid: str) -> dict[str, Any]:
        return self._message_json(self._message(cid, mid))

    async def _api_list_messages(self, r: _Req, cid: str) -> list[dict[str, Any]]:
        """GET /channels/{id}/messages as Discord answers it: newest first."""
        self._channel(cid)
        try:
            limit = int(r.query.get("limit", "50"))
            anchors = {k: int(r.query[k]) for k in ("after", "before", "around") if k in r.query}
        except ValueError:
            raise _form_error("limit", "NUMBER_TYPE_COERCE", "Value is not int.") from None
        if not 1 <= limit <= 100:
            raise _form_error("limit", "NUMBER_TYPE_MAX", "int value should be <= 100.")
        if len(anchors) > 1:
            raise _form_error("before", "MESSAGE_ANCHOR_CONFLICT", "Only one anchor allowed.")
        messages = sorted(self._messages.get(int(cid), {}).values(), key=lambda m: m.id)
        if "after" in anchors:
            chosen = [m for m in messages if m.id > anchors["after"]][:limit]
        elif "before" in anchors:
            chosen = [m for m in messages if m.id < anchors["before"]][-limit:]
        elif "around" in anchors:
            older = [m for m in messages if m.id < anchors["around"]][-(limit // 2) :]
            rest = [m for m in messages if m.id >= anchors["around"]]
            chosen = older + rest[: limit - len(older)]
        else:
            chosen = messages[-limit:]
        return [self._message_json(m) for m in reversed(chosen)]

    async def _api_post_message(self, r: _Req, cid: str) -> dict[str, Any]:
        self._channel(cid)
        content = self._checked_content(r.body, required=True)
        reference = r.body.get("message_reference") or {}
        ref = reference.get("message_id")
        if ref is not None and int(ref) not in self._messages.get(int(cid), {}):
            if reference.get("fail_if_not_exists", True):
                raise _form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                                  "Unknown message")  # fmt: skip
            ref = None
        stored = self._store(int(cid), self.me, content, reply_to=None if ref is None else int(ref),
                             flags=int(r.body.get("flags") or 0))  # fmt: skip
        stored.allowed_mentions = r.body.get("allowed_mentions")
        await self._echo("MESSAGE_CREATE", stored)
        return self._message_json(stored)

    async def _api_edit_message(self, r: _Req, cid: str, mid: str) -> dict[str, Any]:
        stored = self._message(cid, mid)
        if not stored.by_bot:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._edit(stored, r.body)
        await self._echo("MESSAGE_UPDATE", stored)
        return self._message_json(stored)

    async def _api_delete_message(self, _: _Req, cid: str, mid: str) -> None:
        del self._messages[int(cid)][self._message(cid, mid).id]

    async def _api_thread(self, r: _Req, cid: str, mid: str | None = None) -> dict[str, Any]:
        parent = self._channel(cid)
        if "guild_id" not in parent or parent["type"] in (11, 12):
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        name = str(r.body.get("name") or "")
        if not 1 <= len(name) <= 100:
            raise _form_error(
                "name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
            )
        tid = self._message(cid, mid).id if mid is not None else self._snowflake()
        kind = 11 if mid is not None else int(r.body.get("type") or 12)
        archive = int(r.body.get("auto_archive_duration") or 4320)
        thread = self._new_thread(tid, int(cid), name, owner=BOT_ID, kind=kind, archive=archive)
        if self.session is not None:
            await self.dispatch("THREAD_CREATE", thread | {"newly_created": True})
        return thread

    async def _api_get_commands(self, _: _Req, app: str, gid: str | None = None) -> list[Any]:
        return self.commands if gid is None else self.guild_commands.get(int(gid), [])

    async def _api_put_commands(self, r: _Req, app: str, gid: str | None = None) -> list[Any]:
        """A bulk overwrite: the body becomes the command set (ids kept for known names)."""
        if int(app) != APP_ID:
            raise ApiError(403, 50001, "Missing Access")
        body = r.body if isinstance(r.body, list) else []
        self.command_syncs.append(body)
        current = self.commands if gid is None else self.guild_commands.get(int(gid), [])
        ids = {c["name"]: c["id"] for c in current}
        result = []
        for i, cmd in enumerate(body):
            name, description = str(cmd.get("name", "")), str(cmd.get("description", ""))
            if not _COMMAND_NAME.match(name) or name != name.lower():
                raise _form_error(f"{i}.name", "APPLICATION_COMMAND_INVALID_NAME", "Invalid name")
            if cmd.get("type", 1) == 1 and not 1 <= len(description) <= 100:
                raise _form_error(f"{i}.description", "BASE_TYPE_BAD_LENGTH",
                                  "Must be between 1 and 100 in length.")  # fmt: skip
            result.append({
                "type": 1, "options": [], "default_member_permissions": None, "nsfw": False, **cmd,
                "id": ids.get(name) or str(self._snowflake()), "application_id": str(APP_ID),
                "version": str(self._snowflake()),
            })  # fmt: skip
            if gid is not None:
                result[-1]["guild_id"] = gid
        if gid is None:
            self.commands = result
        else:
            self.guild_commands[int(gid)] = result
        return result

    async def _api_callback(self, r: _Req, iid: str, tok: str) -> dict[str, Any] | None:
        record = self.interactions.get(int(iid))
        if (
            record is None
            or record.token != tok
            or (
                not record.callbacks
                and time.monotonic() - record.sent_at > self.interaction_deadline
            )
        ):
            raise ApiError(404, 10062, "Unknown interaction")
        if record.callbacks:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        kind, data = int(r.body.get("type", 0)), r.body.get("data") or {}
        if kind not in (4, 5):  # 4: reply now, 5: deferred ("is thinking…")
            raise _form_error("type", "INTERACTION_RESPONSE_TYPE_INVALID", "Invalid response type")
        flags = int(data.get("flags") or 0) & EPHEMERAL
        content = self._checked_content(data, required=True) if kind == 4 else ""
        record.callbacks.append(r.body)
        record.original = self._store(record.channel_id, self.me, content,
                                      flags=flags if kind == 4 else flags | LOADING)  # fmt: skip
        record.original.interaction_id = record.id
        if kind == 4 and not flags:
            await self._echo("MESSAGE_CREATE", record.original)
        if r.query.get("with_response") not in _TRUE:
            return None
        response = {"id": iid, "type": 2, "response_message_id": str(record.original.id),
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(flags)}  # fmt: skip
        resource = {"type": kind, "message": self._message_json(record.original)}
        return {"interaction": response, "resource": resource}

    async def _api_followup(self, r: _Req, app: str, tok: str) -> dict[str, Any] | None:
        record = self._interaction(app, tok)
        if not record.callbacks:
            raise ApiError(404, 10015, "Unknown Webhook")
        content = self._checked_content(r.body, required=True)
        flags = int(r.body.get("flags") or 0) & EPHEMERAL
        stored = self._store(record.channel_id, self.me, content, flags=flags)
        stored.interaction_id = record.id
        record.followups.append(stored)
        if not flags:
            await self._echo("MESSAGE_CREATE", stored)
        return self._message_json(stored) if r.query.get("wait") in _TRUE else None

    async def _api_webhook(self, r: _Req, app: str, tok: str, mid: str) -> dict[str, Any] | None:
        """GET / PATCH / DELETE of an interaction's original response or a followup."""
        record = self._interaction(app, tok)
        original = record.original if mid == "@original" else None
        found = original or next((m for m in record.followups if str(m.id) == mid), None)
        if found is None:
            raise ApiError(404, 10008, "Unknown Message")
        if r.method == "DELETE":
            del self._messages[found.channel_id][found.id]
            return None
        if r.method == "PATCH":
            self._edit(found, r.body)
            found.flags &= ~LOADING
            if not found.flags & EPHEMERAL:
                await self._echo("MESSAGE_UPDATE", found)
        return self._message_json(found)

    # -- internals ---------------------------------------------------------
    def _snowflake(self) -> int:
        now = (int(self.clock() * 1000) - _DISCORD_EPOCH_MS) << 22
        self._last_id = max(now, self._last_id + 1)
        return self._last_id

    def _channel(self, cid: str | int) -> dict[str, Any]:
        channel = self.channels.get(int(cid))
        if channel is None:
            raise ApiError(404, 10003, "Unknown Channel")
        return channel

    def _message(self, cid: str | int, mid: str | int) -> StoredMessage:
        self._channel(cid)
        stored = self._messages.get(int(cid), {}).get(int(mid))
        if stored is None:
            raise ApiError(404, 10008, "Unknown Message")
        return stored

    def _interaction(self, app: str, tok: str) -> InteractionRecord:
        found = next((i for i in self.interactions.values() if i.token == tok), None)
        if int(app) != APP_ID or found is None:
            raise ApiError(401, 50027, "Invalid Webhook Token")
        return found

    def _checked_content(self, body: dict[str, Any], *, required: bool) -> str:
        content = "" if body.get("content") is None else str(body["content"])
        if len(content) > MAX_CHARS:
            raise _form_error("content", "BASE_TYPE_MAX_LENGTH",
                              f"Must be {MAX_CHARS} or fewer in length.")  # fmt: skip
        other = ("embeds", "attachments", "sticker_ids", "poll", "components")
        if required and not content and not any(body.get(k) for k in other):
            raise ApiError(400, 50006, "Cannot send an empty message")
        return content

    def _store(
        self, cid: int, author: dict[str, Any], content: str, *, reply_to: int | None = None,
        flags: int = 0,
    ) -> StoredMessage:  # fmt: skip
        channel = self.channels[cid]
        gid = int(channel["guild_id"]) if "guild_id" in channel else None
        stored = StoredMessage(self._snowflake(), cid, author, content, gid, reply_to, flags,
                               versions=[content], timestamp=_iso(self.clock()))  # fmt: skip
        self._messages.setdefault(cid, {})[stored.id] = stored
        channel["last_message_id"] = str(stored.id)
        if channel["type"] in (11, 12):
            channel["message_count"] = channel["total_message_sent"] = channel["message_count"] + 1
        return stored

    def _edit(self, stored: StoredMessage, body: dict[str, Any]) -> None:
        if "content" in body:
            stored.content = self._checked_content(body, required=False)
        if "allowed_mentions" in body:
            stored.allowed_mentions = body["allowed_mentions"]
        stored.edits += 1
        stored.versions.append(stored.content)
        stored.edit_times.append(time.monotonic())
        stored.edited_timestamp = _iso()

    async def _echo(self, event: str, stored: StoredMessage) -> None:
        if self.echo_bot_messages and self.session is not None:
            await self.dispatch(event, self._message_json(stored, gateway=True))

    def _message_json(
        self, m: StoredMessage, *, gateway: bool = False, nested: bool = False
    ) -> Any:
        ids = {int(x) for x in _USER_MENTION.findall(m.content)}
        mentions = [
            self.user(i, "bridge-bot" if i == BOT_ID else None, bot=i == BOT_ID) for i in ids
        ]
        data: dict[str, Any] = {
            "id": str(m.id), "channel_id": str(m.channel_id), "author": m.author,
            "content": m.content, "timestamp": m.timestamp, "edited_timestamp": m.edited_timestamp,
            "tts": False, "mention_everyone": False, "mentions": mentions, "mention_roles": [],
            "attachments": m.attachments, "embeds": [], "components": [], "pinned": False,
            "flags": m.flags,
            "type": 19 if m.reference else (20 if m.interaction_id else 0),  # REPLY, CHAT_INPUT
        }  # fmt: skip
        if m.interaction_id is not None:
            data |= {"webhook_id": str(APP_ID), "application_id": str(APP_ID)}
        if m.reference is not None:
            data["message_reference"] = {"type": 0, "message_id": str(m.reference),
                                         "channel_id": str(m.channel_id)}  # fmt: skip
            replied = self._messages.get(m.channel_id, {}).get(m.reference)
            if not nested:  # null: the replied-to message was deleted
                data["referenced_message"] = replied and self._message_json(replied, nested=True)
        if m.guild_id is not None and gateway:
            data["guild_id"] = str(m.guild_id)
            if m.interaction_id is None:
                data["member"] = {"roles": [], "joined_at": _iso(), "flags": 0, "deaf": False,
                                  "mute": False}  # fmt: skip
        return data

    def _record_frame(self, name: str, data: Any) -> None:
        self.gateway_log.append(Call("WS", name, data, time.monotonic()))
