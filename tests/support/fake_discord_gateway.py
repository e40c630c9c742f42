"""The gateway half of `tests.support.fake_discord`: Discord's websocket protocol,
the world it announces (guilds, channels, threads, DMs) and the events tests send.

Imitates gateway v10 as discord.py meets it: HELLO (op 10), heartbeats (op 1 →
op 11), IDENTIFY (op 2) checked for token and intents (close 4004 / 4013 /
4014 like Discord), READY with `resume_gateway_url`, then one GUILD_CREATE per
guild; RESUME (op 6) replays the dispatches the client missed, then RESUMED;
an unknown session gets INVALID_SESSION (op 9, false). Frames are zlib-stream
compressed when the client asks `compress=zlib-stream` (as Discord does), plain
text otherwise. Mixed into `FakeDiscord`, which holds the REST side and the
message store. Intents filter message events as Discord does (see `_as_seen`).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from tests.support.fake_discord import StoredMessage

GUILDS, GUILD_MEMBERS, GUILD_PRESENCES = 1 << 0, 1 << 1, 1 << 8
GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT = 1 << 9, 1 << 12, 1 << 15
PRIVILEGED_INTENTS = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT
TOKEN = "MTAwMDAwMDAwMDAwMDAwMDAx.fake.discord-bot-token"
BOT_ID = APP_ID = 1000000000000000001  # an application's id is its bot user's id
USER_ID, GUILD_ID = 1000000000000000002, 1000000000000000010
CHANNEL_ID, THREAD_ID = 1000000000000000011, 1000000000000000012
EPHEMERAL, LOADING = 1 << 6, 1 << 7
ALL_PERMISSIONS = str((1 << 51) - 1)
OP_NAMES = {1: "HEARTBEAT", 2: "IDENTIFY", 3: "PRESENCE_UPDATE", 6: "RESUME", 8: "REQUEST_MEMBERS"}


def _iso(ts: float | None = None) -> str:
    when = datetime.datetime.fromtimestamp(time.time() if ts is None else ts, datetime.UTC)
    return when.isoformat()


@dataclass(slots=True)
class InteractionRecord:
    """An INTERACTION_CREATE this fake sent, and what the bot answered."""

    id: int
    token: str
    name: str
    channel_id: int
    sent_at: float
    callbacks: list[dict[str, Any]] = field(default_factory=list)  # every callback body
    original: StoredMessage | None = None
    followups: list[StoredMessage] = field(default_factory=list)

    @property
    def response_type(self) -> int | None:
        return self.callbacks[0]["type"] if self.callbacks else None

    @property
    def ephemeral(self) -> bool:
        return self.original is not None and bool(self.original.flags & EPHEMERAL)


@dataclass(slots=True, eq=False)
class _Conn:
    ws: web.WebSocketResponse
    request: web.Request
    compressor: Any = None  # zlib.compressobj when the client asked for zlib-stream
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, frame: dict[str, Any]) -> None:
        raw = json.dumps(frame, separators=(",", ":"))
        async with self.lock:
            if self.ws.closed:
                return
            try:
                if self.compressor is None:
                    await self.ws.send_str(raw)
                else:
                    data = self.compressor.compress(raw.encode())
                    await self.ws.send_bytes(data + self.compressor.flush(zlib.Z_SYNC_FLUSH))
            except (ConnectionError, RuntimeError):
                pass  # the peer went away; a resume replays what it missed


@dataclass(slots=True)
class Session:
    """One gateway session: what RESUME needs (id, sequence, replay log)."""

    session_id: str
    intents: int
    shard: list[int] | None
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)


class GatewayMixin:
    """Gateway state and helpers; `FakeDiscord` provides the attributes used here."""

    token: str
    port: int
    me: dict[str, Any]
    app: dict[str, Any]
    guilds: dict[int, dict[str, Any]]
    heartbeat_interval_ms: int
    granted_intents: int
    require_message_content: bool
    ack_heartbeats: bool
    zlib_stream: bool
    gateway_log: list[Any]
    channels: dict[int, dict[str, Any]]
    commands: list[dict[str, Any]]
    interactions: dict[int, InteractionRecord]
    # Provided by FakeDiscord:
    _snowflake: Callable[[], int]
    _store: Callable[..., StoredMessage]
    _message_json: Callable[..., Any]
    bot_messages: Callable[..., list[StoredMessage]]

    def _init_gateway(self) -> None:
        self.session: Session | None = None
        self.identify_count = 0
        self.resume_count = 0
        self.heartbeats = 0
        self.gateway_paths: list[str] = []  # path of every gateway connection, in order
        self.zlib_connections = 0  # connections answered in zlib-stream (the client asked)
        self.close_codes: list[int] = []  # codes this fake closed the gateway with
        self._live: _Conn | None = None
        self._conns: set[_Conn] = set()
        self._ready = asyncio.Event()

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gw"

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gw/resume"

    # -- test-side helpers -------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._live is not None and self._ready.is_set()

    async def wait_ready(self, within: float = 30.0) -> None:
        """Until a connection has been sent READY (or RESUMED) and is still open."""
        await asyncio.wait_for(self._ready.wait(), within)

    async def dispatch(self, event: str, data: dict[str, Any]) -> int | None:
        """Send a dispatch (op 0) on the session; returns its sequence number.

        With no live connection the event is kept for the resume replay, as
        Discord does. Events the session's intents exclude are dropped (None).
        """
        session = self.session
        if session is None:
            raise RuntimeError("no gateway session: nobody has identified yet")
        seen = self._as_seen(session.intents, event, data)
        if seen is None:
            return None
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": seen}
        session.log.append(frame)
        if self._live is not None:
            await self._live.send(frame)
        return session.seq

    async def drop_connection(self) -> None:
        """Cut the TCP connection without a close frame (a network failure)."""
        conn = self._detach()
        if conn is not None and conn.request.transport is not None:
            conn.request.transport.abort()

    async def send_reconnect(self) -> None:
        """Op 7 RECONNECT: Discord asks the client to reconnect and resume."""
        conn = self._detach()
        if conn is not None:
            await conn.send({"op": 7, "d": None, "s": None, "t": None})

    async def send_invalid_session(self, resumable: bool = False) -> None:
        """Op 9; with `resumable=False` the session is forgotten."""
        conn = self._detach()
        if not resumable:
            self.session = None
        if conn is not None:
            await conn.send({"op": 9, "d": resumable, "s": None, "t": None})

    async def close_gateway(self, code: int, reason: str = "") -> None:
        """Close the live connection with a gateway close code (4000, 4009, …)."""
        conn = self._detach()
        if conn is not None:
            await self._close(conn, code, reason)

    # -- world building ----------------------------------------------------
    def user(self, user_id: int, name: str | None = None, *, bot: bool = False) -> dict[str, Any]:
        return {
            "id": str(user_id), "username": name or f"user{user_id}", "discriminator": "0",
            "global_name": name, "avatar": None, "bot": bot, "public_flags": 0, "flags": 0,
        }  # fmt: skip

    def add_guild(
        self,
        guild_id: int,
        name: str,
        channels: dict[int, str],
        *,
        threads: dict[int, int] | None = None,
        users: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A guild with text channels {id: name}, threads {id: parent id}, the bot as member."""
        members = [
            {"user": u, "roles": [], "joined_at": _iso(), "flags": 0, "deaf": False, "mute": False}
            for u in [self.me, *(users or [self.user(USER_ID, "alice")])]
        ]
        everyone = {
            "id": str(guild_id), "name": "@everyone", "permissions": ALL_PERMISSIONS,
            "position": 0, "color": 0, "hoist": False, "managed": False, "flags": 0,
        }  # fmt: skip
        guild = {"id": str(guild_id), "name": name, "owner_id": str(USER_ID), "members": members,
                 "roles": [everyone]}  # fmt: skip
        self.guilds[guild_id] = guild
        for cid, cname in channels.items():
            self.channels[cid] = {
                "id": str(cid), "type": 0, "guild_id": str(guild_id), "name": cname,
                "position": len(self.channels), "nsfw": False, "permission_overwrites": [],
                "rate_limit_per_user": 0,
            }  # fmt: skip
        for tid, parent in (threads or {}).items():
            self._new_thread(tid, parent, f"thread-{tid}", owner=USER_ID)
        return guild

    def dm_channel(self, user_id: int = USER_ID) -> int:
        """The DM channel between the bot and `user_id` (created on first use)."""
        for cid, ch in self.channels.items():
            if ch["type"] == 1 and ch["recipients"][0]["id"] == str(user_id):
                return cid
        cid = self._snowflake()
        self.channels[cid] = {"id": str(cid), "type": 1, "last_message_id": None, "flags": 0,
                              "recipients": [self.user(user_id)]}  # fmt: skip
        return cid

    # -- events the tests send ---------------------------------------------
    def user_message(
        self,
        channel_id: int,
        content: str,
        *,
        author: int = USER_ID,
        mention_bot: bool = False,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """MESSAGE_CREATE data for a user's message (stored in the channel)."""
        if mention_bot:
            content = f"<@{BOT_ID}> {content}"
        stored = self._store(
            channel_id,
            self.user(author, "alice" if author == USER_ID else None),
            content,
            reply_to=reply_to,
        )
        return self._message_json(stored, gateway=True)

    async def send_dm(self, content: str, *, author: int = USER_ID) -> dict[str, Any]:
        data = self.user_message(self.dm_channel(author), content, author=author)
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def send_guild_message(
        self,
        content: str,
        *,
        channel_id: int = CHANNEL_ID,
        author: int = USER_ID,
        mention_bot: bool = False,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        data = self.user_message(
            channel_id, content, author=author, mention_bot=mention_bot, reply_to=reply_to
        )
        await self.dispatch("MESSAGE_CREATE", data)
        return data

    async def send_reply_to_bot(
        self, content: str, *, channel_id: int = CHANNEL_ID, author: int = USER_ID
    ) -> dict[str, Any]:
        """A reply to the bot's latest message there (message_reference + referenced_message)."""
        mine = self.bot_messages(channel_id)
        if not mine:
            raise AssertionError(f"the bot has no message in channel {channel_id} to reply to")
        return await self.send_guild_message(
            content, channel_id=channel_id, author=author, reply_to=mine[-1].id
        )

    async def send_thread_message(
        self, content: str, *, thread_id: int = THREAD_ID, author: int = USER_ID
    ) -> dict[str, Any]:
        return await self.send_guild_message(content, channel_id=thread_id, author=author)

    async def send_slash_command(
        self,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        channel_id: int = CHANNEL_ID,
        author: int = USER_ID,
    ) -> InteractionRecord:
        """INTERACTION_CREATE for `/name` (type 2, chat input); string/int/bool options."""
        channel = self.channels[channel_id]
        known = {c["name"]: c for c in self.commands}
        types = {str: 3, bool: 5, int: 4, float: 10}
        record = InteractionRecord(
            self._snowflake(), f"itoken-{self._snowflake()}", name, channel_id, time.monotonic()
        )
        given = [
            {"name": k, "type": types[type(v)], "value": v} for k, v in (options or {}).items()
        ]
        data: dict[str, Any] = {
            "id": str(record.id), "application_id": str(APP_ID), "type": 2, "token": record.token,
            "version": 1, "channel_id": str(channel_id), "channel": channel, "locale": "en-US",
            "app_permissions": ALL_PERMISSIONS, "entitlements": [],
            "attachment_size_limit": 1 << 23,
            "data": {"id": known.get(name, {}).get("id", str(self._snowflake())), "name": name,
                     "type": 1, "options": given},
        }  # fmt: skip
        user = self.user(author, "alice" if author == USER_ID else None)
        if "guild_id" in channel:
            member = {"user": user, "roles": [], "joined_at": _iso(), "flags": 0,
                      "permissions": ALL_PERMISSIONS, "deaf": False, "mute": False}  # fmt: skip
            data |= {
                "guild_id": channel["guild_id"], "guild_locale": "en-US", "context": 0,
                "authorizing_integration_owners": {"0": channel["guild_id"]}, "member": member,
            }  # fmt: skip
        else:
            owners = {"1": str(author)}
            data |= {"user": user, "context": 1, "authorizing_integration_owners": owners}
        self.interactions[record.id] = record
        await self.dispatch("INTERACTION_CREATE", data)
        return record

    # -- websocket ---------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        compressed = self.zlib_stream and request.query.get("compress") == "zlib-stream"
        conn = _Conn(ws, request, zlib.compressobj() if compressed else None)
        self._conns.add(conn)
        self.gateway_paths.append(request.path)
        self.zlib_connections += compressed
        hello = {"heartbeat_interval": self.heartbeat_interval_ms}
        await conn.send({"op": 10, "d": hello, "s": None, "t": None})
        try:
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    await self._on_frame(conn, json.loads(msg.data))
        finally:
            self._conns.discard(conn)
            if self._live is conn:
                self._detach()
        return ws

    async def _on_frame(self, conn: _Conn, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        self._record_frame(OP_NAMES.get(op or 0, f"op {op}"), data)
        if op == 1:
            self.heartbeats += 1
            if self.ack_heartbeats:
                await conn.send({"op": 11, "s": None, "t": None, "d": None})
        elif op == 2:
            await self._identify(conn, data or {})
        elif op == 6:
            await self._resume(conn, data or {})
        elif op == 8 and self._live is conn:
            await self._member_chunk(data or {})

    async def _identify(self, conn: _Conn, data: dict[str, Any]) -> None:
        self.identify_count += 1
        if data.get("token") != self.token:
            return await self._close(conn, 4004, "Authentication failed.")
        intents = data.get("intents")
        if not isinstance(intents, int):
            return await self._close(conn, 4013, "Invalid intent(s).")
        if intents & PRIVILEGED_INTENTS & ~self.granted_intents or (
            self.require_message_content and not intents & MESSAGE_CONTENT
        ):
            return await self._close(conn, 4014, "Disallowed intent(s).")
        self.session = Session(uuid.uuid4().hex, intents, data.get("shard"))
        self._attach(conn)
        ready: dict[str, Any] = {
            "v": 10, "user": self.me, "session_id": self.session.session_id,
            "resume_gateway_url": self.resume_gateway_url, "session_type": "normal",
            "guilds": [{"id": str(gid), "unavailable": True} for gid in self.guilds],
            "application": {"id": self.app["id"], "flags": self.app["flags"]},
            "private_channels": [], "relationships": [], "presences": [], "auth": {},
            "guild_join_requests": [], "geo_ordered_rtc_regions": [],
        }  # fmt: skip
        if self.session.shard is not None:
            ready["shard"] = self.session.shard
        await self.dispatch("READY", ready)
        for gid in self.guilds:
            await self.dispatch("GUILD_CREATE", self._guild_create(gid))
        self._ready.set()

    async def _resume(self, conn: _Conn, data: dict[str, Any]) -> None:
        session = self.session
        known = session is not None and data.get("session_id") == session.session_id
        if session is None or not known or data.get("token") != self.token:
            await conn.send({"op": 9, "d": False, "s": None, "t": None})
            return
        self.resume_count += 1
        self._attach(conn)
        seen = int(data.get("seq") or 0)
        for frame in [f for f in session.log if f["s"] > seen]:
            await conn.send(frame)
        await self.dispatch("RESUMED", {})
        self._ready.set()

    async def _member_chunk(self, data: dict[str, Any]) -> None:
        guild = self.guilds.get(int(data.get("guild_id", 0)))
        if guild is not None:
            chunk = {"guild_id": str(guild["id"]), "members": guild["members"], "not_found": [],
                     "chunk_index": 0, "chunk_count": 1, "nonce": data.get("nonce")}  # fmt: skip
            await self.dispatch("GUILD_MEMBERS_CHUNK", chunk)

    # -- internals ---------------------------------------------------------
    def _attach(self, conn: _Conn) -> None:
        old = self._live
        self._live = conn
        if old is not None and old is not conn:
            asyncio.get_running_loop().create_task(old.ws.close(code=4000))

    def _detach(self) -> _Conn | None:
        conn, self._live = self._live, None
        self._ready.clear()
        return conn

    async def _close(self, conn: _Conn, code: int, reason: str) -> None:
        self.close_codes.append(code)
        await conn.ws.close(code=code, message=reason.encode())

    async def _close_all(self) -> None:
        self._detach()
        for conn in list(self._conns):
            await conn.ws.close(code=1001)

    def _as_seen(self, intents: int, event: str, data: dict[str, Any]) -> dict[str, Any] | None:
        """What a session with `intents` receives of a message event (None: nothing)."""
        if event not in ("MESSAGE_CREATE", "MESSAGE_UPDATE"):
            return data
        in_guild = "guild_id" in data
        if not intents & (GUILD_MESSAGES if in_guild else DIRECT_MESSAGES):
            return None
        author = str(data.get("author", {}).get("id"))
        mentioned = any(u.get("id") == self.me["id"] for u in data.get("mentions", []))
        if in_guild and not intents & MESSAGE_CONTENT and author != self.me["id"] and not mentioned:
            return data | {"content": "", "embeds": [], "attachments": [], "components": []}
        return data

    def _guild_create(self, gid: int) -> dict[str, Any]:
        chans = [c for c in self.channels.values() if c.get("guild_id") == str(gid)]
        return self.guilds[gid] | {
            "unavailable": False, "joined_at": _iso(), "large": False, "preferred_locale": "en-US",
            "member_count": len(self.guilds[gid]["members"]), "presences": [], "voice_states": [],
            "channels": [c for c in chans if c["type"] not in (11, 12)],
            "threads": [c for c in chans if c["type"] in (11, 12)], "stage_instances": [],
            "guild_scheduled_events": [], "soundboard_sounds": [], "emojis": [], "stickers": [],
            "features": [],
        }  # fmt: skip

    def _new_thread(
        self, tid: int, parent: int, name: str, *, owner: int, kind: int = 11, archive: int = 4320
    ) -> dict[str, Any]:
        gid = self.channels[parent]["guild_id"]
        metadata = {"archived": False, "auto_archive_duration": archive,
                    "archive_timestamp": _iso(), "locked": False}  # fmt: skip
        self.channels[tid] = thread = {
            "id": str(tid), "type": kind, "guild_id": gid, "parent_id": str(parent), "name": name,
            "owner_id": str(owner), "message_count": 0, "member_count": 1, "total_message_sent": 0,
            "rate_limit_per_user": 0, "flags": 0, "last_message_id": None,
            "thread_metadata": metadata,
        }  # fmt: skip
        return thread

    def _record_frame(self, name: str, data: Any) -> None:
        raise NotImplementedError
