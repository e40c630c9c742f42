"""`SlackPlatform`: bolt events in, `handler.accept` out, `SlackOutbox` back.

Durability: bolt runs with `process_before_response=True`, so the ack (the
Socket Mode envelope ack, or the HTTP 200) is sent only after our listener
returned, and the listener returns only once the engine's inbox holds the
message (or the event needs no answer). When the inbox cannot take it the
listener raises: bolt answers 500 / sends no ack and Slack delivers the event
again. Slack's retries carry the same `event_id`, which is the inbox key, so
a retried event is acked and dropped (bolt itself does not de-duplicate).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import (
    MentionRule,
    MessageHandler,
    Route,
    WebRequest,
    WebResponse,
    always_mention,
)
from chatbridge.platforms._look_back import TakenHere
from chatbridge.platforms._runtime import InboxRefusals, Taken, one_line, reveal, take
from chatbridge.platforms._starting import start_or_fail

from ._files import SlackFiles
from ._filters import Address, BotIdentity, SlackThreads, normalise
from ._format import MrkdwnRenderer
from ._outbox import SlackOutbox, StatusSwitch, slack_delivery
from ._settings import SlackSettings
from ._startup import check_tokens, connect
from ._stream import StreamSwitch

__all__ = ["EVENTS_PATH", "NotTaken", "SlackPlatform"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class NotTaken(Exception):
    """The inbox did not take an event; raised into bolt so Slack is not acked."""


class SlackPlatform:
    """Receives Slack events (Socket Mode when `app_token` is set, else HTTP
    Events at `POST /slack/events`, declared in `routes`) and hands them to
    the engine. Commands are typed as text: no slash command is registered.

    The HTTP route answers 503 until `start()` and after `stop_receiving()`;
    the signing secret is checked first (bad signature or stale timestamp ->
    401, nothing reaches the engine); bolt answers `url_verification` itself.
    """

    name = "slack"
    routes: tuple[Route, ...] = ()  # HTTP mode: POST EVENTS_PATH

    def __init__(
        self,
        *,
        config: SlackSettings,
        handler: MessageHandler,
        say: Callable[[str], str] | None = None,
        mention_rule: MentionRule = always_mention,
    ) -> None:
        """`say` gives the bot's own sentences (its language); with it, a user whose
        message the inbox cannot take is told so (`InboxRefusals`). `mention_rule`
        says where channel messages need no mention (`require_mention: false`)."""
        self._config = config
        self._mention_rule = mention_rule
        self._handler = handler
        self._refusals = InboxRefusals(say, self.outbox) if say is not None else None
        self._bot_token = reveal(config.bot_token)
        self._app_token = reveal(config.app_token) if config.app_token is not None else None
        secret = reveal(config.signing_secret) if config.signing_secret is not None else ""
        self._verifier = SignatureVerifier(secret or "socket-mode-needs-no-secret")
        self._client = AsyncWebClient(token=self._bot_token, base_url=config.base_url)
        self._files = SlackFiles(
            self._bot_token, base_url=config.base_url or "https://slack.com/api/"
        )
        self._app = AsyncApp(
            client=self._client,
            signing_secret=secret or "socket-mode-needs-no-secret",
            process_before_response=True,
            request_verification_enabled=self._app_token is None,
        )
        self._app.event(re.compile(".*"))(self._listener())
        self._app.error(self._on_error)
        self._renderer = MrkdwnRenderer()
        self._delivery = slack_delivery()
        self._status = StatusSwitch(False)
        self._threads = SlackThreads()
        self._streams = StreamSwitch(bool(config.native_stream))
        self._team = ""  # from auth.test
        self._me: BotIdentity | None = None
        self._taken_here = TakenHere()  # answers to these need no look back
        self._socket: AsyncSocketModeHandler | None = None
        self._receiving = False
        if self._app_token is None:
            if not secret:
                raise ValueError("slack HTTP mode needs a signing_secret")
            self.routes = (Route("POST", EVENTS_PATH, self._http),)

    @property
    def connected(self) -> bool:
        return self._receiving

    @property
    def socket_mode(self) -> bool:
        return self._app_token is not None

    async def start(self) -> None:
        """Checks the tokens, `auth.test` and scopes, then starts receiving.

        Raises `PlatformStartFailed` with one sentence (rejected token, wrong
        token type, missing scopes, Socket Mode refused) and leaves nothing open.
        """
        check_tokens(self._bot_token, self._app_token)
        failures = ((SlackApiError, _socket_refused),)
        await start_or_fail("slack", self._connect, failures=failures, close=self.aclose)
        assert self._me is not None
        mode = "Socket Mode" if self.socket_mode else f"HTTP events at {EVENTS_PATH}"
        why = self._config.mode_reason
        log.info(
            "slack: receiving as %s via %s%s", self._me.user_id, mode, f" ({why})" if why else ""
        )

    async def _connect(self) -> None:
        granted = await connect(self._client)
        self._me, self._team = granted.me, granted.team
        self._status.enabled = granted.has("assistant:write")
        self._receiving = True
        if self._app_token is not None:
            # slack-sdk's Socket Mode client retries a refused app token
            # forever; one probe first turns that into a start-up error.
            await self._client.apps_connections_open(app_token=self._app_token)
            self._socket = AsyncSocketModeHandler(self._app, self._app_token)
            await self._socket.connect_async()

    def outbox(self, message: IncomingMessage) -> SlackOutbox:
        try:
            address = Address.decode(message.reply_address)
        except ValueError:
            conversation = message.conversation
            address = Address(conversation.chat, conversation.thread)
        return SlackOutbox(
            self._client,
            address,
            edit_interval=self._config.edit_interval,
            renderer=self._renderer,
            delivery=self._delivery,
            status=self._status,
            threads=self._threads,
            streams=self._streams,
            recipient_user=message.conversation.user,
            team=self._team,
            me=self._me.user_id if self._me is not None else "",
            look_back=message.event_id not in self._taken_here,
            files=self._files,
        )

    async def stop_receiving(self) -> None:
        """Stops taking events (Socket Mode closed, the HTTP route answers 503)."""
        self._receiving = False
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                await socket.close_async()
            except Exception as exc:
                log.debug("slack: closing Socket Mode failed: %s", one_line(exc))

    async def aclose(self) -> None:
        await self.stop_receiving()
        await self._files.aclose()

    def _listener(self) -> Any:
        async def on_event(body: dict[str, Any], event: dict[str, Any]) -> None:
            await self._receive(body, event)

        return on_event

    async def _receive(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """Returns once the event is in the inbox or needs no answer; else raises."""
        if self._me is None or not self._receiving:
            raise NotTaken("not receiving yet")
        try:
            message = normalise(
                event,
                str(body.get("event_id") or ""),
                self._me,
                self._threads,
                team=str(body.get("team_id") or self._team),
                mention_rule=self._mention_rule,
            )
        except Exception as exc:
            log.warning("slack: dropped an event it could not read (%s)", one_line(exc))
            return
        if message is None:
            return
        taken = await self._taken_here.take(
            message.event_id, take("slack", self._handler, message, refusals=self._refusals)
        )
        if taken is Taken.REFUSED:
            raise NotTaken(f"the inbox did not take {message.event_id}")

    async def _on_error(self, error: Exception, body: dict[str, Any]) -> BoltResponse:
        log.warning("slack: event %s not acknowledged: %s", body.get("event_id"), one_line(error))
        return BoltResponse(status=500, body="")

    async def _http(self, request: WebRequest) -> WebResponse:
        """Signature first (401 before any parsing), then bolt; a body bolt
        cannot read is a 400, never a 500.

        The signature headers are checked for their shape before slack-sdk
        sees them: its verifier raises on a timestamp that is not a number
        (`int("abc")`) and on a non-ASCII signature (`hmac.compare_digest`).
        """
        if not self._receiving:
            return WebResponse(503)
        body = await request.read()
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not (_is_timestamp(stamp) and _is_signature(signature)):
            return WebResponse(401)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return WebResponse(400)  # Slack sends UTF-8: not an event of Slack's
        try:
            valid = self._verifier.is_valid(body=text, timestamp=stamp, signature=signature)
        except (ValueError, TypeError):  # a shape the checks above did not foresee
            valid = False
        if not valid:
            return WebResponse(401)
        if not _event_shape_ok(text):
            return WebResponse(400)  # Slack's events carry a string type
        try:
            bolt = AsyncBoltRequest(
                body=text, query=request.query_string, headers=dict(request.headers)
            )
            response = await self._app.async_dispatch(bolt)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            # RecursionError: a body nested deeper than the JSON parser goes.
            log.warning("slack: refused an event body it could not read (%s)", one_line(exc))
            return WebResponse(400)
        return _web_response(response)


def _socket_refused(exc: Exception) -> str:
    """A Slack API error at start-up: `auth.test`'s are explained by `connect`,
    so this is `apps.connections.open` refusing the app token."""
    error = exc.response.get("error", "unknown_error") if isinstance(exc, SlackApiError) else ""
    return f"slack refused Socket Mode ({error}); check platforms.slack.app_token"


def _web_response(response: BoltResponse) -> WebResponse:
    """bolt's answer (its status, body and first header values) for chatbridge's server."""
    return WebResponse(
        response.status,
        response.body.encode("utf-8"),
        response.first_headers_without_set_cookie(),
    )


def _event_shape_ok(text: str) -> bool:
    """False for an `event_callback` whose event is not an object with a string
    `type`: bolt's matchers raise on it inside the dispatch, which would make
    it a 500. Bodies that are not such JSON are left to bolt (400 above)."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return True
    if not isinstance(body, dict) or body.get("type") != "event_callback":
        return True
    event = body.get("event")
    return isinstance(event, dict) and isinstance(event.get("type"), str)


def _is_timestamp(value: str) -> bool:
    """Unix seconds as Slack sends them: ASCII digits (`str.isdigit` alone takes `١٢٣`)."""
    return 0 < len(value) <= 20 and value.isascii() and value.isdigit()


def _is_signature(value: str) -> bool:
    """`v0=` and a hex digest; anything else cannot match and must not reach `hmac`."""
    return 0 < len(value) <= 200 and value.isascii() and value.isprintable()
