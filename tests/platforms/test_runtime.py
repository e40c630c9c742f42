"""What every adapter shares, written once beside `platforms/_runtime.py`: the
mention rule (one behaviour on all three platforms, checked through each real
normaliser and SDK type), the bounded memory of answered threads, start-up
failures as one sentence, and the one deliver path."""

from __future__ import annotations

import asyncio
from typing import Any

import discord
import pytest
import telegram
from discord.user import ClientUser

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import DeliveryError, DeliveryRetry, PlatformStartFailed
from chatbridge.platforms import discord as discord_platform
from chatbridge.platforms import slack as slack_platform
from chatbridge.platforms import telegram as telegram_platform
from chatbridge.platforms._deliver import Delivery, FormattingRefused
from chatbridge.platforms._runtime import ChatGate
from chatbridge.platforms._starting import start_or_fail
from chatbridge.platforms._threads import AnsweredThreads

# -- one mention rule -------------------------------------------------------------------

# (text after the mention, with "{at}" where the bot is mentioned) -> what the engine gets
MENTIONS = {
    "{at}, what is X?": "what is X?",
    "{at}: what is X?": "what is X?",
    "hi {at} what is X?": "hi what is X?",
    "hi, {at} what is X?": "hi, what is X?",
    "{at}\n```\n    indented  code\n```": "```\n    indented  code\n```",
}
TG_BOT = telegram_platform.BotIdentity(id=7000, username="chemitek_bot")
SLACK_BOT = slack_platform.BotIdentity(user_id="UBOT0001")
DISCORD_BOT = 10


def _telegram(template: str) -> IncomingMessage | None:
    before, _, _ = template.partition("{at}")
    mention = f"@{TG_BOT.username}"
    data = {
        "update_id": 1,
        "message": {
            "message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"},
            "from": {"id": 2, "is_bot": False, "first_name": "A"},
            "text": template.replace("{at}", mention),
            "entities": [{"type": "mention", "offset": len(before), "length": len(mention)}],
        },
    }  # fmt: skip
    update = telegram.Update.de_json(data, telegram.Bot("123456:not-used"))
    return telegram_platform.normalise(update, TG_BOT)


def _slack(template: str) -> IncomingMessage | None:
    event = {
        "type": "message", "channel_type": "im", "channel": "D0001", "user": "U0001",
        "ts": "1700000000.000100", "text": template.replace("{at}", f"<@{SLACK_BOT.user_id}>"),
    }  # fmt: skip
    return slack_platform.normalise(event, "Ev1", SLACK_BOT, slack_platform.SlackThreads())


def _discord(template: str) -> IncomingMessage | None:
    client = discord.Client(intents=discord.Intents.default())
    state = client._connection
    user: Any = {"id": "20", "username": "u", "discriminator": "0", "avatar": None}
    me: Any = {"id": str(DISCORD_BOT), "username": "bot", "discriminator": "0", "avatar": None}
    state.user = ClientUser(state=state, data=me)
    dm: Any = {"id": "30", "type": 1, "recipients": [user]}
    channel = discord.DMChannel(me=state.user, state=state, data=dm)
    data: Any = {
        "id": "99", "type": 0, "author": user, "attachments": [], "embeds": [],
        "content": template.replace("{at}", f"<@{DISCORD_BOT}>"), "channel_id": "30",
        "timestamp": "2024-01-01T00:00:00+00:00", "mentions": [],
    }  # fmt: skip
    return discord_platform.normalise(
        discord.Message(state=state, channel=channel, data=data), DISCORD_BOT
    )


@pytest.mark.parametrize(
    "normalise", [_telegram, _slack, _discord], ids=["telegram", "slack", "discord"]
)
def test_every_platform_strips_a_mention_alike(normalise: Any) -> None:
    """ "@bot, what is X?" reaches the engine as "what is X?" on every platform;
    the rest of the text (a comma before the mention, code indentation) stays."""
    got = {}
    for template in MENTIONS:
        message = normalise(template)
        assert message is not None, template
        got[template] = message.text
    assert got == MENTIONS


# -- answered threads --------------------------------------------------------------------


def test_answered_threads_forget_the_least_recently_answered_past_the_limit() -> None:
    threads = AnsweredThreads[str](limit=2)
    threads.add("a")
    threads.add("b")
    threads.add("a")  # answered again: now the newest
    threads.add("c")
    assert "b" not in threads
    assert list(threads) == ["a", "c"]
    assert len(threads) == 2


# -- start-up failures -------------------------------------------------------------------


class TokenRefused(Exception):
    pass


class Opened:
    """What a start opened, closed by `start_or_fail`'s `close`."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def _fail_with(exc: BaseException) -> None:
    raise exc


async def test_a_known_failure_is_its_sentence_and_nothing_stays_open() -> None:
    opened = Opened()
    failures = ((TokenRefused, "x rejected the token; check platforms.x.token"),)
    with pytest.raises(PlatformStartFailed) as caught:
        await start_or_fail(
            "x", lambda: _fail_with(TokenRefused("token 123:SECRET is bad")),
            failures=failures, close=opened.close,
        )  # fmt: skip
    assert str(caught.value) == "x rejected the token; check platforms.x.token"
    # Not chained: an SDK's message may quote the token.
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert opened.closed == 1


async def test_any_other_failure_is_one_generic_line_and_a_sentence_function_is_called() -> None:
    opened = Opened()
    failures = ((TokenRefused, lambda exc: f"refused: {exc}"),)
    with pytest.raises(PlatformStartFailed, match=r"^x could not start \(OSError: no\s+route\)$"):
        await start_or_fail(
            "x", lambda: _fail_with(OSError("no\n route")), failures=failures, close=opened.close
        )
    with pytest.raises(PlatformStartFailed, match=r"^refused: why$"):
        await start_or_fail(
            "x", lambda: _fail_with(TokenRefused("why")), failures=failures, close=opened.close
        )
    with pytest.raises(PlatformStartFailed, match=r"^as it is$"):
        await start_or_fail(
            "x",
            lambda: _fail_with(PlatformStartFailed("as it is")),
            failures=(),
            close=opened.close,
        )
    with pytest.raises(asyncio.CancelledError):
        await start_or_fail(
            "x", lambda: _fail_with(asyncio.CancelledError()), failures=(), close=opened.close
        )
    assert opened.closed == 4


# -- the one deliver path ----------------------------------------------------------------


class RateLimited(Exception):
    pass


class MarkupRefused(Exception):
    pass


def classify(exc: Exception, what: str) -> BaseException | None:
    """A platform's table, as adapters write theirs."""
    if isinstance(exc, RateLimited):
        return DeliveryRetry(7.0)
    if isinstance(exc, MarkupRefused):
        return FormattingRefused()
    return None


class RecordingGate(ChatGate):
    def __init__(self) -> None:
        super().__init__()
        self.blocked: list[tuple[str, float]] = []

    def block(self, chat: str, seconds: float) -> None:
        self.blocked.append((chat, seconds))


class Wire:
    """An SDK call that refuses bodies listed in `refuse`, recording every body it got."""

    def __init__(self, refuse: dict[str, Exception]) -> None:
        self.refuse = refuse
        self.got: list[str] = []

    async def call(self, body: str) -> str:
        self.got.append(body)
        if body in self.refuse:
            raise self.refuse[body]
        return f"sent:{body}"


async def test_refused_formatting_is_resent_plain_once() -> None:
    wire = Wire({"*b*": MarkupRefused()})
    delivery = Delivery("x", classify)
    assert await delivery.send("post", "c1", wire.call, "*b*", "b") == "sent:b"
    assert wire.got == ["*b*", "b"]


async def test_refused_formatting_without_a_plain_body_is_a_delivery_error() -> None:
    for plain in (None, "b"):  # nothing formatted; or the plain body refused too
        wire = Wire({"*b*": MarkupRefused(), "b": MarkupRefused("plain refused")})
        with pytest.raises(DeliveryError) as caught:
            await Delivery("x", classify).send("post", "c1", wire.call, "*b*", plain)
        assert not isinstance(caught.value, FormattingRefused)
        assert str(caught.value).startswith("x post: ")


async def test_flood_control_blocks_the_chat_and_unmapped_errors_are_one_line() -> None:
    gate = RecordingGate()
    delivery = Delivery("x", classify, gate=gate)
    with pytest.raises(DeliveryRetry):
        await delivery.call("post", "c1", lambda: Wire({"a": RateLimited()}).call("a"))
    assert gate.blocked == [("c1", 7.0)]
    with pytest.raises(DeliveryError) as caught:
        await delivery.call("edit", "c1", lambda: Wire({"a": ValueError("a\nb")}).call("a"))
    assert str(caught.value) == "x edit: a b"
    assert isinstance(caught.value.__cause__, ValueError)
