"""Self-tests of the fake Slack, driven by the real slack_sdk and slack_bolt.

Each test runs an unpatched SDK against `FakeSlack` and asserts what the fake
recorded, so a wrong wire shape in the fake shows up here and not in the
adapter tests.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.support import fake_slack_events as ev
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack

SECRET = "test-signing-secret"
Headers = dict[str, Any]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=slack.base_url)


def bolt_app(slack: FakeSlack) -> AsyncApp:
    web_client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.base_url)
    return AsyncApp(client=web_client, signing_secret=SECRET)


@pytest.fixture
async def socket_app(slack: FakeSlack) -> AsyncIterator[tuple[AsyncApp, AsyncSocketModeHandler]]:
    """A Bolt app in Socket Mode; connect it after registering listeners."""
    app = bolt_app(slack)
    handler = AsyncSocketModeHandler(app, APP_TOKEN, ping_interval=0.2)
    yield app, handler
    await handler.close_async()


# -- Web API -----------------------------------------------------------------
async def test_post_then_update_shows_the_current_text_in_the_thread(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    root = ev.next_ts()
    posted = await client.chat_postMessage(channel=ev.CHANNEL, thread_ts=root, text="draft")
    updated = await client.chat_update(channel=ev.CHANNEL, ts=posted["ts"], text="final answer")

    assert posted["channel"] == ev.CHANNEL
    assert posted["message"]["thread_ts"] == root
    assert updated["ts"] == posted["ts"]
    assert slack.thread(ev.CHANNEL, root) == ["final answer"]
    stored = slack.message(ev.CHANNEL, posted["ts"])
    assert stored is not None
    assert (stored.edits, stored.bot_id, stored.user) == (1, ev.BOT_ID, ev.BOT_USER_ID)
    assert [c.method for c in slack.calls] == ["chat.postMessage", "chat.update"]
    assert slack.calls[0].params == {"channel": ev.CHANNEL, "thread_ts": root, "text": "draft"}

    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*form*"}}]
    form = {"channel": ev.CHANNEL, "thread_ts": root, "text": "form", "blocks": json.dumps(blocks)}
    await client.api_call("chat.postMessage", data=form)  # form-encoded, blocks as JSON text
    assert slack.thread(ev.CHANNEL, root) == ["final answer", "form"]
    assert slack.messages(ev.CHANNEL)[-1].blocks == blocks


async def test_ephemeral_and_delete(slack: FakeSlack, client: AsyncWebClient) -> None:
    posted = await client.chat_postMessage(channel=ev.DM_CHANNEL, text="to be deleted")
    ephemeral = await client.chat_postEphemeral(
        channel=ev.CHANNEL, user=ev.USER_ID, text="only you see this"
    )
    await client.chat_delete(channel=ev.DM_CHANNEL, ts=posted["ts"])

    assert slack.bot_texts(ev.DM_CHANNEL) == []
    assert [m.text for m in slack.deleted] == ["to be deleted"]
    assert [(m.recipient, m.ts) for m in slack.ephemerals] == [
        (ev.USER_ID, ephemeral["message_ts"])
    ]
    assert slack.bot_texts(ev.CHANNEL) == []  # ephemerals are not in the channel
    with pytest.raises(SlackApiError) as info:
        await client.chat_update(channel=ev.DM_CHANNEL, ts=posted["ts"], text="gone")
    assert info.value.response["error"] == "message_not_found"


async def test_429_raises_with_retry_after_then_recovers(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.rate_limit_next("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel=ev.CHANNEL, text="first")
    response = info.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    assert response.headers["Retry-After"] == "7"

    await client.chat_postMessage(channel=ev.CHANNEL, text="second")
    assert slack.bot_texts(ev.CHANNEL) == ["second"]
    assert [c.error for c in slack.calls] == ["ratelimited", None]


async def test_throttled_updates_get_429_when_too_close(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.throttle_updates(5.0)
    posted = await client.chat_postMessage(channel=ev.CHANNEL, text="a")
    await client.chat_update(channel=ev.CHANNEL, ts=posted["ts"], text="ab")
    with pytest.raises(SlackApiError) as info:
        await client.chat_update(channel=ev.CHANNEL, ts=posted["ts"], text="abc")
    assert info.value.response.status_code == 429
    assert info.value.response.headers["Retry-After"] == "5"
    assert slack.bot_texts(ev.CHANNEL) == ["ab"]


async def test_wrong_tokens_are_refused(slack: FakeSlack) -> None:
    wrong = AsyncWebClient(token="xoxb-wrong", base_url=slack.base_url)
    with pytest.raises(SlackApiError) as info:
        await wrong.chat_postMessage(channel=ev.CHANNEL, text="x")
    assert (info.value.response.status_code, info.value.response["error"]) == (200, "invalid_auth")

    app_token_client = AsyncWebClient(token=APP_TOKEN, base_url=slack.base_url)
    with pytest.raises(SlackApiError) as info:
        await app_token_client.chat_postMessage(channel=ev.CHANNEL, text="x")
    assert info.value.response["error"] == "not_allowed_token_type"
    with pytest.raises(SlackApiError) as info:
        await AsyncWebClient(base_url=slack.base_url).apps_connections_open(app_token=BOT_TOKEN)
    assert info.value.response["error"] == "not_allowed_token_type"
    assert slack.bot_texts(ev.CHANNEL) == []


@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing:UserWarning")
async def test_limits_refuse_just_past_the_edge(slack: FakeSlack, client: AsyncWebClient) -> None:
    async def error_of(**kwargs: Any) -> str | None:
        try:
            await client.chat_postMessage(channel=ev.CHANNEL, **kwargs)
        except SlackApiError as exc:
            return str(exc.response["error"])
        return None

    def markdown(n: int) -> list[dict[str, Any]]:
        return [{"type": "markdown", "text": "m" * n}]

    def section(n: int) -> list[dict[str, Any]]:
        return [{"type": "section", "text": {"type": "mrkdwn", "text": "s" * n}}]

    assert await error_of(text="x" * 40_000) is None
    assert await error_of(text="x" * 40_001) == "msg_too_long"
    assert await error_of(text="md", blocks=markdown(12_000)) is None
    assert await error_of(text="md", blocks=markdown(12_001)) == "invalid_blocks"
    assert await error_of(text="md", blocks=markdown(6_001) * 2) == "invalid_blocks"
    assert await error_of(text="sec", blocks=section(3_000)) is None
    assert await error_of(text="sec", blocks=section(3_001)) == "invalid_blocks"
    assert await error_of() == "no_text"
    assert await error_of(blocks=section(5)) is None  # blocks alone are enough
    assert slack.bot_texts(ev.CHANNEL)[-1] == "sssss"
    assert len(slack.bot_texts(ev.CHANNEL)) == 4


async def test_auth_test_scopes_and_lookups(slack: FakeSlack, client: AsyncWebClient) -> None:
    auth = await client.auth_test()
    assert (auth["team_id"], auth["user_id"], auth["bot_id"]) == (
        ev.TEAM_ID, ev.BOT_USER_ID, ev.BOT_ID,
    )  # fmt: skip
    assert auth["url"].startswith("https://")
    assert auth["team"]
    assert auth["user"]
    assert set(auth.headers["x-oauth-scopes"].split(",")) == set(ev.DEFAULT_SCOPES)

    with pytest.raises(SlackApiError) as info:
        await client.users_info(user=ev.USER_ID)  # nobody has heard of Alice yet
    assert info.value.response["error"] == "user_not_found"
    slack.event_payload(ev.dm_message("hi"))  # now she has written to the bot
    user = await client.users_info(user=ev.USER_ID)
    channel = await client.conversations_info(channel=ev.DM_CHANNEL)
    assert (user["user"]["id"], user["user"]["is_bot"]) == (ev.USER_ID, False)
    assert channel["channel"]["is_im"]
    assert channel["channel"]["user"] == ev.USER_ID
    with pytest.raises(SlackApiError) as info:
        await client.conversations_info(channel="C0NOWHERE")
    assert info.value.response["error"] == "channel_not_found"


async def test_missing_scope_for_set_status(slack: FakeSlack, client: AsyncWebClient) -> None:
    root = ev.next_ts()
    await client.assistant_threads_setStatus(channel_id=ev.DM_CHANNEL, thread_ts=root, status="…")
    assert slack.statuses == [(ev.DM_CHANNEL, root, "…")]

    slack.deny_scope("assistant.threads.setStatus")
    with pytest.raises(SlackApiError) as info:
        await client.assistant_threads_setStatus(
            channel_id=ev.DM_CHANNEL, thread_ts=root, status="thinking"
        )
    assert info.value.response["error"] == "missing_scope"
    assert info.value.response["needed"] == "assistant:write"
    assert "chat:write" in info.value.response["provided"].split(",")
    await client.chat_postMessage(channel=ev.DM_CHANNEL, text="still works")
    assert len(slack.statuses) == 1

    slack.scopes.discard("chat:write")
    with pytest.raises(SlackApiError) as info:
        await client.chat_postMessage(channel=ev.DM_CHANNEL, text="no")
    assert info.value.response["needed"] == "chat:write"


async def test_chat_stream_start_append_stop(slack: FakeSlack, client: AsyncWebClient) -> None:
    root = ev.next_ts()
    streamer = await client.chat_stream(channel=ev.DM_CHANNEL, thread_ts=root, buffer_size=10)
    await streamer.append(markdown_text="Hello")  # buffered, no call yet
    assert slack.calls == []
    await streamer.append(markdown_text=", streaming")  # flushes: chat.startStream
    await streamer.append(markdown_text=" world, more text")  # chat.appendStream
    await streamer.stop(markdown_text="!")

    assert [c.method for c in slack.calls] == [
        "chat.startStream", "chat.appendStream", "chat.stopStream",
    ]  # fmt: skip
    assert slack.thread(ev.DM_CHANNEL, root) == ["Hello, streaming world, more text!"]
    stored = slack.message(ev.DM_CHANNEL, str(streamer.ts))
    assert stored is not None
    assert not stored.streaming
    assert stored.appends == 1
    with pytest.raises(SlackRequestError):
        await streamer.append(markdown_text="late")
    assert len(slack.calls) == 3
    with pytest.raises(SlackApiError) as info:
        await client.chat_appendStream(
            channel=ev.DM_CHANNEL, ts=str(streamer.ts), markdown_text="x"
        )
    assert info.value.response["error"] == "message_not_in_streaming_state"

    in_channel = await client.chat_stream(channel=ev.CHANNEL, thread_ts=root, buffer_size=1)
    with pytest.raises(SlackApiError) as info:
        await in_channel.append(markdown_text="needs a recipient")
    assert info.value.response["error"] == "missing_recipient_user_id"


async def test_events_enter_the_transcript(slack: FakeSlack) -> None:
    question = ev.channel_message("what is up?")
    reply = ev.channel_message("in thread", thread_ts=question["ts"], user=ev.OTHER_USER_ID)
    for event in (question, reply, ev.message_changed(question, "what is new?")):
        slack.event_payload(event)
    assert [m.text for m in slack.messages(ev.CHANNEL)] == ["what is new?", "in thread"]
    assert slack.messages(ev.CHANNEL)[1].thread_ts == question["ts"]
    slack.event_payload(ev.message_deleted(reply))
    assert [m.edits for m in slack.messages(ev.CHANNEL)] == [1]


# -- Socket Mode ---------------------------------------------------------------
async def test_raw_socket_mode_client_hello_ack_and_reconnects(slack: FakeSlack) -> None:
    frames: list[dict[str, Any]] = []
    requests: list[SocketModeRequest] = []

    async def on_frame(message: Any) -> None:
        frames.append(json.loads(message.data))

    async def on_request(client: Any, request: SocketModeRequest) -> None:
        requests.append(request)
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    client = SocketModeClient(
        app_token=APP_TOKEN, web_client=AsyncWebClient(base_url=slack.base_url),
        ping_interval=0.2, on_message_listeners=[on_frame],
    )  # fmt: skip
    client.socket_mode_request_listeners.append(on_request)
    try:
        await client.connect()
        first = await slack.socket_event(ev.dm_message("one"))
        assert frames[0]["type"] == "hello"
        assert first.latency is not None
        assert first.latency < 1
        assert not first.late
        assert first.ack == {"envelope_id": first.envelope_id}
        assert requests[0].payload["event"]["text"] == "one"
        assert (requests[0].type, requests[0].retry_attempt) == ("events_api", 0)

        await slack.disconnect_sockets()
        await slack.wait_for(lambda: slack.socket_connects == 2 and slack.connected == 1)
        assert (await slack.socket_event(ev.dm_message("two"))).ack is not None

        slack.drop_sockets()
        await slack.wait_for(lambda: slack.socket_connects == 3 and slack.connected == 1)
        assert (await slack.socket_event(ev.dm_message("three"))).ack is not None
        assert [r.payload["event"]["text"] for r in requests] == ["one", "two", "three"]
        assert len(slack.calls_to("apps.connections.open")) == 3
    finally:
        await client.close()


async def test_bolt_socket_mode_mention_acked_before_say_lands(
    slack: FakeSlack, socket_app: tuple[AsyncApp, AsyncSocketModeHandler]
) -> None:
    app, handler = socket_app

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], say: Any) -> None:
        await asyncio.sleep(0.2)  # a slow listener: Bolt acks before it finishes
        await say(text=f"hi <@{event['user']}>", thread_ts=event["ts"])

    await handler.connect_async()
    mention = ev.app_mention("hello")
    delivery = await slack.socket_event(mention)
    await slack.wait_for(lambda: slack.thread(ev.CHANNEL, mention["ts"]))

    assert slack.thread(ev.CHANNEL, mention["ts"]) == [f"hi <@{ev.USER_ID}>"]
    assert delivery.ack == {"envelope_id": delivery.envelope_id}
    assert delivery.latency is not None
    assert delivery.latency < 0.2
    posted_at = slack.calls_to("chat.postMessage")[0].at
    assert delivery.acked_at is not None
    assert delivery.acked_at < posted_at
    assert slack.calls_to("auth.test")  # Bolt authorized the event with auth.test
    assert next(m.text for m in slack.messages(ev.CHANNEL)) == mention["text"]


async def test_bolt_runs_a_socket_retry_again_with_retry_headers(
    slack: FakeSlack, socket_app: tuple[AsyncApp, AsyncSocketModeHandler]
) -> None:
    app, handler = socket_app
    runs: list[tuple[str, Headers]] = []

    @app.event("message")
    async def on_message(body: dict[str, Any], request: Any) -> None:
        runs.append((body["event_id"], dict(request.headers)))

    await handler.connect_async()
    event = ev.dm_message("once, please")
    first = await slack.socket_event(event)
    retry = await slack.socket_event(
        event, event_id=first.event_id, retry_attempt=1, retry_reason="timeout"
    )
    await slack.wait_for(lambda: len(runs) == 2)

    assert first.envelope_id != retry.envelope_id
    assert retry.ack is not None
    assert runs[0][0] == runs[1][0] == first.event_id  # Bolt does not de-duplicate
    assert runs[0][1]["x-slack-retry-num"] == ["0"]
    assert (runs[1][1]["x-slack-retry-num"], runs[1][1]["x-slack-retry-reason"]) == (
        ["1"], ["timeout"],
    )  # fmt: skip


async def test_bolt_acks_its_own_messages_but_not_unhandled_events(
    slack: FakeSlack, socket_app: tuple[AsyncApp, AsyncSocketModeHandler]
) -> None:
    app, handler = socket_app
    seen: list[str] = []

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        seen.append(event["text"])

    await handler.connect_async()
    own = await slack.socket_event(ev.bot_message("my own echo", channel=ev.DM_CHANNEL))
    assert own.ack is not None
    unhandled = await slack.socket_event(
        {"type": "reaction_added", "user": ev.USER_ID, "reaction": "+1", "event_ts": ev.next_ts()},
        within=0.4,
        require_ack=False,
    )
    assert unhandled.ack is None
    assert unhandled.late
    assert seen == []


# -- HTTP Events API -------------------------------------------------------------
async def test_bolt_http_mode_signatures_retries_and_url_verification(slack: FakeSlack) -> None:
    app = bolt_app(slack)
    runs: list[tuple[str, Headers]] = []

    @app.event("message")
    async def on_message(event: dict[str, Any], request: Any) -> None:
        runs.append((event["text"], dict(request.headers)))

    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        event = ev.dm_message("over http")
        event_id = slack.event_payload(event)["event_id"]

        status, _, latency = await slack.post_event(
            url, event, signing_secret=SECRET, event_id=event_id
        )
        assert (status, latency < 1) == (200, True)
        await slack.wait_for(lambda: len(runs) == 1)
        assert runs[0][0] == "over http"
        assert "x-slack-retry-num" not in runs[0][1]

        bad = await slack.post_event(url, ev.dm_message("forged"), signing_secret=SECRET,
                                     bad_signature=True)  # fmt: skip
        stale = await slack.post_event(url, ev.dm_message("replayed"), signing_secret=SECRET,
                                       timestamp=int(time.time()) - 301)  # fmt: skip
        assert (bad[0], stale[0]) == (401, 401)

        retry = await slack.post_event(url, event, signing_secret=SECRET, event_id=event_id,
                                       retry_num=1)  # fmt: skip
        assert retry[0] == 200
        await slack.wait_for(lambda: len(runs) == 2)
        assert runs[1][1]["x-slack-retry-num"] == ["1"]
        assert runs[1][1]["x-slack-retry-reason"] == ["http_timeout"]

        reaction = {"type": "reaction_added", "user": ev.USER_ID, "reaction": "+1"}
        unhandled = await slack.post_event(url, reaction, signing_secret=SECRET)
        assert unhandled[0] == 404  # no listener: not a 2xx, so Slack would retry it

        status, body, _ = await slack.post_url_verification(url, signing_secret=SECRET)
        assert (status, json.loads(body)) == (200, {"challenge": "fake-challenge"})
        assert [text for text, _ in runs] == ["over http", "over http"]
    finally:
        await runner.cleanup()


async def test_history_and_replies_page_as_slack_does(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    question = ev.dm_message("Frage")
    slack.user_message(question)
    posted = []
    for n in range(3):
        reply = await client.chat_postMessage(channel=ev.DM_CHANNEL, text=f"antwort {n}")
        posted.append(reply["ts"])
    in_thread = await client.chat_postMessage(
        channel=ev.DM_CHANNEL, text="im Faden", thread_ts=question["ts"]
    )

    # history: top level only, newest first, `oldest` exclusive, paged by cursor.
    first = await client.conversations_history(
        channel=ev.DM_CHANNEL, oldest=question["ts"], limit=2
    )
    assert [m["ts"] for m in first["messages"]] == [posted[2], posted[1]]
    assert first["has_more"] is True
    cursor = first["response_metadata"]["next_cursor"]
    rest = await client.conversations_history(
        channel=ev.DM_CHANNEL, oldest=question["ts"], limit=2, cursor=cursor
    )
    assert [m["ts"] for m in rest["messages"]] == [posted[0]]
    assert rest["has_more"] is False
    assert all(m["bot_id"] == ev.BOT_ID for m in rest["messages"])

    # replies: the parent first, then the thread oldest first.
    thread = await client.conversations_replies(channel=ev.DM_CHANNEL, ts=question["ts"])
    assert [m["ts"] for m in thread["messages"]] == [question["ts"], in_thread["ts"]]
    with pytest.raises(SlackApiError) as refused:
        await client.conversations_replies(channel=ev.DM_CHANNEL, ts="1.000001")
    assert refused.value.response["error"] == "thread_not_found"
