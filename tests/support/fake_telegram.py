"""A fake Telegram Bot API server for tests: aiohttp on 127.0.0.1, port 0.

Point PTB at it with `ApplicationBuilder().base_url(fake.base_url)`. It keeps
what the real API keeps (pending updates with offsets, per-chat messages,
webhook state) and answers errors the way Telegram does, so adapters are
tested against behaviour rather than mocks. Every call is recorded in
`calls`. Fault knobs: `fail_next` (429), `reject_entities_next` (400 can't
parse entities), `refuse_drafts` (400 on sendMessageDraft), `forget_method`
(404, as a Bot API server too old to know a method answers); "message is too
long", "message is not modified" and entities past the end of the text are
always refused, as Telegram does.

Drafts (`sendMessageDraft`, Bot API 9.3+) are kept per chat in `drafts`
(every update, in order) and are no messages: they never enter the
transcript. Like Telegram, a draft outside a private chat is refused
(TEXTDRAFT_PEER_INVALID) and a zero draft_id too.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import aiohttp
from aiohttp import web

TOKEN = "123456:TEST-token"
MAX_CHARS = 4096
# Form fields Telegram reads as strings; every other form value is JSON.
_STRING_FIELDS = frozenset({"text", "url", "secret_token", "action", "parse_mode", "caption"})
_AUTO_ENTITIES = re.compile(r"(?P<command>^/[A-Za-z0-9_]+(?:@\w+)?)|(?P<mention>@\w{4,32})")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float


@dataclass(slots=True)
class StoredMessage:
    """One message as the chat shows it now (after any edits)."""

    message_id: int
    chat: dict[str, Any]
    sender: dict[str, Any]
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    thread_id: int | None = None
    reply_to: int | None = None
    edits: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": self.message_id,
            "date": int(time.time()),
            "chat": self.chat,
            "from": self.sender,
            "text": self.text,
        }
        if self.entities:
            data["entities"] = self.entities
        if self.thread_id is not None:
            data |= {"message_thread_id": self.thread_id, "is_topic_message": True}
        return data


@dataclass(frozen=True, slots=True)
class TelegramFile:
    file_id: str
    data: bytes
    path: str  # file_path, e.g. photos/file_1.jpg
    size: int  # what Telegram reports (may lie in tests)
    too_big: bool = False

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class ApiError(Exception):
    def __init__(self, code: int, description: str, **parameters: Any) -> None:
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters


class UpdateOptions(TypedDict, total=False):
    """`make_update`'s keyword arguments, which `push_text` passes on."""

    chat_type: str
    thread_id: int | None
    reply_to_bot: bool
    from_bot: bool
    entities: list[dict[str, Any]] | None
    edited: bool


class FakeTelegram:
    """The fake server; use as `async with FakeTelegram() as fake:`."""

    def __init__(self, *, token: str = TOKEN, bot_id: int = 4242, username: str = "bridge_bot"):
        self.token = token
        self.me = {"id": bot_id, "is_bot": True, "first_name": "Bridge", "username": username}
        self.calls: list[Call] = []
        self.served: list[int] = []  # update_ids returned by getUpdates, repeats included
        self.commands: list[dict[str, Any]] = []
        self.webhook: dict[str, Any] = {}
        self._pending: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._update_ids = itertools.count(1)
        self._message_ids: defaultdict[int, itertools.count[int]] = defaultdict(
            lambda: itertools.count(1)
        )
        self._chats: dict[int, dict[str, Any]] = {}
        self._store: defaultdict[int, dict[int, StoredMessage]] = defaultdict(dict)
        self._fail: defaultdict[str, list[int]] = defaultdict(list)
        self._reject_entities = 0
        self._refuse_drafts: str | None = None
        self._unknown: set[str] = set()
        self.drafts: defaultdict[int, list[tuple[int, str]]] = defaultdict(list)
        self.files: dict[str, TelegramFile] = {}
        self.downloads: list[str] = []  # file_paths whose bytes were served, in order
        self.fail_downloads = False  # /file/... answers 500
        self.cut_off = 0  # requests whose client hung up before their body arrived
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------
    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._arrived.set()  # release abandoned long polls so shutdown is quick
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    # -- test-side helpers -------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages(self, chat_id: int) -> list[StoredMessage]:
        return list(self._store[chat_id].values())

    def bot_texts(self, chat_id: int) -> list[str]:
        """The chat transcript as users see it: the bot's messages, current text."""
        return [m.text for m in self.messages(chat_id) if m.sender["id"] == self.me["id"]]

    def fail_next(self, method: str, *, count: int = 1, retry_after: int = 1) -> None:
        """The next `count` calls of `method` answer 429 with `retry_after`."""
        self._fail[method] += [retry_after] * count

    def failures_left(self, method: str) -> int:
        """Injected 429s for `method` not yet served."""
        return len(self._fail[method])

    def reject_entities_next(self, count: int = 1) -> None:
        """The next `count` calls carrying entities/parse_mode answer 400 can't parse."""
        self._reject_entities += count

    def refuse_drafts(self, description: str = "Bad Request: TEXTDRAFT_PEER_INVALID") -> None:
        """Every later sendMessageDraft answers 400 `description`; None accepts them again."""
        self._refuse_drafts = description

    def forget_method(self, method: str) -> None:
        """`method` answers 404 Not Found, as on a Bot API server that predates it."""
        self._unknown.add(method)

    def push_text(
        self, chat_id: int, user_id: int, text: str, **options: Unpack[UpdateOptions]
    ) -> int:
        """Queue an update for getUpdates (`make_update`'s); returns its update_id."""
        update = self.make_update(chat_id, user_id, text, **options)
        self._pending.append(update)
        self._arrived.set()
        return int(update["update_id"])

    def make_update(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to_bot: bool = False,
        from_bot: bool = False,
        entities: list[dict[str, Any]] | None = None,
        edited: bool = False,
    ) -> dict[str, Any]:
        """An update as Telegram would send it (entities detected like Telegram does)."""
        chat = self._chat(chat_id, chat_type, forum=thread_id is not None)
        sender = {"id": user_id, "is_bot": from_bot, "first_name": f"User{user_id}"}
        stored = StoredMessage(
            next(self._message_ids[chat_id]), chat, sender, text,
            _detect_entities(text) if entities is None else entities, thread_id,
        )  # fmt: skip
        self._store[chat_id][stored.message_id] = stored
        message = stored.to_json()
        replied = self._replied_json(chat_id, thread_id, reply_to_bot)
        if replied is not None:
            message["reply_to_message"] = replied
        kind = "edited_message" if edited else "message"
        return {"update_id": next(self._update_ids), kind: message}

    def add_file(
        self, data: bytes, *, path: str, reported_size: int | None = None, too_big: bool = False
    ) -> str:
        """Keep `data` as a file; returns its file_id. `reported_size` lies about
        the size in getFile; `too_big` makes getFile refuse it as the cloud API
        does past 20 MB."""
        file_id = f"AgAC{len(self.files) + 1:04d}{path.replace('/', '_').replace('.', '_')}"
        size = len(data) if reported_size is None else reported_size
        self.files[file_id] = TelegramFile(file_id, data, path, size, too_big)
        return file_id

    def push_media(
        self,
        chat_id: int,
        user_id: int,
        *,
        caption: str | None = None,
        chat_type: str = "private",
        **media: Any,
    ) -> int:
        """Queue a media message: `photo=[file_id, ...]` (smallest first),
        `voice=file_id`, `audio=file_id`, `document=file_id`; sizes, types and
        names come from the stored files."""
        chat = self._chat(chat_id, chat_type, forum=False)
        sender = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        message: dict[str, Any] = {
            "message_id": next(self._message_ids[chat_id]),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if caption is not None:
            message["caption"] = caption
            entities = _detect_entities(caption)
            if entities:
                message["caption_entities"] = entities
        for kind, value in media.items():
            message[kind] = self._media_json(kind, value)
        update_id = next(self._update_ids)
        self._pending.append({"update_id": update_id, "message": message})
        self._arrived.set()
        return update_id

    def _media_json(self, kind: str, value: Any) -> Any:
        if kind == "photo":
            return [
                {"file_id": f, "file_unique_id": f"u{f}", "width": 90 * (i + 1),
                 "height": 60 * (i + 1), "file_size": self.files[f].size}
                for i, f in enumerate(value)
            ]  # fmt: skip
        file = self.files[value]
        base = {"file_id": value, "file_unique_id": f"u{value}", "file_size": file.size}
        if kind == "voice":
            return base | {"duration": 3, "mime_type": "audio/ogg"}
        if kind == "audio":
            return base | {"duration": 3, "mime_type": "audio/mpeg", "file_name": file.name}
        mime = {"txt": "text/plain", "pdf": "application/pdf", "png": "image/png"}.get(
            file.name.rsplit(".", 1)[-1], "application/octet-stream"
        )
        return base | {"file_name": file.name, "mime_type": mime}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """GET /file/bot<token>/<file_path>, as the Bot API serves files."""
        if request.match_info["token"] != self.token:
            return web.Response(status=401, text="Unauthorized")
        path = request.match_info["path"]
        found = next((f for f in self.files.values() if f.path == path), None)
        if found is None:
            return web.Response(status=404, text="Not Found")
        if self.fail_downloads:
            return web.Response(status=500, text="Internal Server Error")
        self.downloads.append(path)
        return web.Response(body=found.data, content_type="application/octet-stream")

    async def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self.files.get(str(params.get("file_id")))
        if file is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if file.too_big:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": file.file_id, "file_unique_id": f"u{file.file_id}",
                "file_size": file.size, "file_path": file.path}  # fmt: skip

    async def post_webhook(self, url: str, update: dict[str, Any], *, secret: str | None) -> int:
        """POST `update` to a webhook like Telegram; returns the HTTP status."""
        headers = {} if secret is None else {"X-Telegram-Bot-Api-Secret-Token": secret}
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json=update, headers=headers) as response,
        ):
            return response.status

    async def wait_for(self, predicate: Callable[[], bool], within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met within timeout")
            await asyncio.sleep(0.01)

    # -- API ---------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        try:
            params = await _params(request)
        except ConnectionResetError:
            if not _hung_up(request):
                raise
            # The client went away mid-request (a process stopped while it
            # posted): Telegram never got the call, so none is recorded, and
            # that is no server error. aiohttp writes nothing to a closed
            # connection, so the status goes nowhere.
            self.cut_off += 1
            return web.Response(status=400)
        self.calls.append(Call(method, params, time.monotonic()))
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if self._fail[method]:
                retry = self._fail[method].pop(0)
                raise ApiError(429, f"Too Many Requests: retry after {retry}", retry_after=retry)
            handler = getattr(self, f"_api_{method}", None)
            if handler is None or method in self._unknown:
                raise ApiError(404, "Not Found")
            result = await handler(params)
            if method == "getUpdates" and not _hung_up(request):
                # Served means it reached a poller; a stopped poller's abandoned
                # long poll delivers nothing, and the updates stay pending.
                self.served += [u["update_id"] for u in result]
        except ApiError as exc:
            body: dict[str, Any] = {
                "ok": False, "error_code": exc.code, "description": exc.description
            }  # fmt: skip
            if exc.parameters:
                body["parameters"] = exc.parameters
            return web.json_response(body, status=exc.code)
        return web.json_response({"ok": True, "result": result})

    async def _api_getMe(self, _: dict[str, Any]) -> dict[str, Any]:
        return self.me | {"can_join_groups": True, "can_read_all_group_messages": False}

    async def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = dict(params)
        return True

    async def _api_deleteWebhook(self, _: dict[str, Any]) -> bool:
        self.webhook = {}
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> bool:
        self.commands = list(params.get("commands", []))
        return True

    async def _api_getMyCommands(self, _: dict[str, Any]) -> list[dict[str, Any]]:
        return self.commands

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook.get("url"):
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        # An offset confirms (drops for good) every update below it.
        self._pending = [u for u in self._pending if u["update_id"] >= offset]
        if not self._pending:
            self._arrived.clear()
            wait = min(float(params.get("timeout") or 0), 0.5)
            if wait > 0:
                try:
                    await asyncio.wait_for(self._arrived.wait(), wait)
                except TimeoutError:
                    pass
        return self._pending[: int(params.get("limit") or 100)]

    async def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        self._known_chat(params["chat_id"])
        return True

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        text, entities = self._checked_text(params)
        reply = params.get("reply_parameters") or {}
        stored = StoredMessage(
            next(self._message_ids[chat_id]), self._known_chat(chat_id), self.me, text,
            entities, params.get("message_thread_id"), reply.get("message_id"),
        )  # fmt: skip
        self._store[chat_id][stored.message_id] = stored
        return stored.to_json()

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        chat = self._known_chat(params["chat_id"])
        if self._refuse_drafts is not None:
            raise ApiError(400, self._refuse_drafts)
        if chat["type"] != "private":
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        draft_id = params.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise ApiError(400, "Bad Request: DRAFT_ID_INVALID")  # the wording is a guess
        text = str(params.get("text") or "")
        if text:  # optional since Bot API 10.0: empty shows "Thinking…"
            text, _ = self._checked_text(params)
        self.drafts[int(chat["id"])].append((draft_id, text))
        return True

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        text, entities = self._checked_text(params)
        stored = self._store[chat_id].get(message_id)
        if stored is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if stored.sender["id"] != self.me["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        if (stored.text, stored.entities) == (text, entities):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        stored.text, stored.entities, stored.edits = text, entities, stored.edits + 1
        return stored.to_json()

    # -- internals ---------------------------------------------------------
    def _checked_text(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = str(params.get("text", ""))
        entities = list(params.get("entities") or [])
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_CHARS:
            raise ApiError(400, "Bad Request: message is too long")
        if (entities or params.get("parse_mode")) and self._reject_entities:
            self._reject_entities -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Can't find end of the entity")
        for e in entities:
            if e["offset"] < 0 or e["length"] <= 0 or e["offset"] + e["length"] > utf16_len(text):
                raise ApiError(400, "Bad Request: can't parse entities: entity out of text")
        return text, entities

    def _chat(self, chat_id: int, chat_type: str, *, forum: bool) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = f"User{chat_id}"
        else:
            chat["title"] = f"Group {chat_id}"
        if forum:
            chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def _known_chat(self, chat_id: Any) -> dict[str, Any]:
        chat = self._chats.get(int(chat_id))
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        return chat

    def _replied_json(
        self, chat_id: int, thread_id: int | None, reply_to_bot: bool
    ) -> dict[str, Any] | None:
        if reply_to_bot:
            mine = [m for m in self.messages(chat_id) if m.sender["id"] == self.me["id"]]
            if mine:
                return mine[-1].to_json()
            return StoredMessage(0, self._chats[chat_id], self.me, "earlier answer").to_json()
        if thread_id is not None:
            # Like Telegram: a topic message "replies" to the topic's service
            # message unless it replies to something else. This bot made the topic.
            return {
                "message_id": thread_id, "date": int(time.time()), "chat": self._chats[chat_id],
                "from": self.me, "message_thread_id": thread_id, "is_topic_message": True,
                "forum_topic_created": {"name": "Topic", "icon_color": 7322096},
            }  # fmt: skip
        return None


def _detect_entities(text: str) -> list[dict[str, Any]]:
    found = []
    for match in _AUTO_ENTITIES.finditer(text):
        kind = "bot_command" if match.group("command") else "mention"
        offset = utf16_len(text[: match.start()])
        found.append({"type": kind, "offset": offset, "length": utf16_len(match.group())})
    return found


def _hung_up(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.text()
        return params | (json.loads(body) if body else {})
    for key, value in (await request.post()).items():
        params[key] = value if key in _STRING_FIELDS else _json_or_raw(str(value))
    return params


def _json_or_raw(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value
