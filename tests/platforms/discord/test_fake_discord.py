"""Self-tests of the fake Discord, driven by the real discord.py `Client`.

They prove the fake speaks the protocol discord.py expects (login, gateway,
resume, rate limits, slash commands), so adapter tests can trust it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
from discord import app_commands

from tests.support.fake_discord import (
    BOT_ID,
    CHANNEL_ID,
    EPHEMERAL,
    GUILD_ID,
    THREAD_ID,
    TOKEN,
    USER_ID,
    FakeDiscord,
    point_discord_at,
)

pytestmark = pytest.mark.timeout(20)


class Bot(discord.Client):
    """A plain client that records what reaches it."""

    def __init__(self, *, content: bool = True, **options: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = content
        # guild_ready_timeout: discord.py waits this long after the last GUILD_CREATE
        # before on_ready (2 s by default).
        super().__init__(intents=intents, guild_ready_timeout=0.05, **options)
        self.received: list[discord.Message] = []  # other people's messages
        self.own: list[discord.Message] = []  # the bot's own MESSAGE_CREATE echoes
        self.edits: list[discord.RawMessageUpdateEvent] = []
        self.available: list[int] = []  # on_guild_available
        self.ready = asyncio.Event()

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        (self.own if message.author == self.user else self.received).append(message)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        self.available.append(guild.id)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.edits.append(payload)


@contextlib.asynccontextmanager
async def running(client: Bot, token: str = TOKEN) -> AsyncIterator[Bot]:
    task = asyncio.create_task(client.start(token))
    ready = asyncio.create_task(client.ready.wait())
    try:
        await asyncio.wait({task, ready}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises what start() raised
        assert client.ready.is_set(), "on_ready did not fire"
        yield client
    finally:
        ready.cancel()
        await client.close()
        await task


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        with point_discord_at(server):
            yield server


@pytest.fixture
async def bot(fake: FakeDiscord) -> AsyncIterator[Bot]:
    async with running(Bot()) as client:
        yield client


async def test_json_is_exactly_application_json_and_token_is_checked(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{fake.api_base}/users/@me", headers={"Authorization": f"Bot {TOKEN}"}
        ) as ok:
            assert ok.headers["Content-Type"] == "application/json"
            assert (await ok.json())["id"] == str(BOT_ID)
        async with http.get(
            f"{fake.api_base}/users/@me", headers={"Authorization": "Bot x"}
        ) as bad:
            assert bad.status == 401
        async with http.get(
            f"{fake.api_base}/gateway/bot", headers={"Authorization": f"Bot {TOKEN}"}
        ) as gw:
            assert (await gw.json())["url"] == fake.gateway_url


@pytest.mark.parametrize("zlib_stream", [True, False])
async def test_connect_receive_dm_and_guild_message_and_reply(zlib_stream: bool) -> None:
    async with FakeDiscord(zlib_stream=zlib_stream) as fake, contextlib.AsyncExitStack() as stack:
        stack.enter_context(point_discord_at(fake))
        bot = await stack.enter_async_context(running(Bot()))
        assert bot.user is not None
        assert bot.user.id == BOT_ID
        assert bot.application_id == BOT_ID
        assert [c.path for c in fake.calls[:2]] == ["/users/@me", "/oauth2/applications/@me"]
        assert fake.identify_count == 1
        assert fake.gateway_paths == ["/gw"]
        assert fake.zlib_connections == int(zlib_stream)  # discord.py asks for zlib-stream
        assert fake.heartbeats >= 1  # discord.py beats right after HELLO
        assert fake.session is not None
        assert fake.session.intents & discord.Intents.message_content.flag
        guild = bot.get_guild(GUILD_ID)
        assert guild is not None
        assert guild.get_channel(CHANNEL_ID) is not None
        assert guild.me is not None
        assert bot.available == [GUILD_ID]  # GUILD_CREATE came before on_ready

        await fake.send_dm("hello in private")
        await fake.send_guild_message("hello everyone")
        await fake.wait_for(lambda: len(bot.received) == 2)
        dm, public = bot.received
        assert isinstance(dm.channel, discord.DMChannel)
        assert dm.content == "hello in private"
        assert dm.author.id == USER_ID
        assert dm.guild is None
        assert isinstance(public.channel, discord.TextChannel)
        assert public.content == "hello everyone"
        assert public.guild is not None
        assert public.guild.id == GUILD_ID

        await dm.channel.send("private answer")
        reply = await public.reply("public answer", mention_author=False)
        assert fake.bot_texts(dm.channel.id) == ["private answer"]
        assert fake.bot_texts(CHANNEL_ID) == ["public answer"]
        stored = fake.bot_messages(CHANNEL_ID)[0]
        assert stored.reference == public.id
        assert reply.reference is not None
        post = fake.calls_to("POST /channels/*/messages")[-1]
        assert post.body["allowed_mentions"]["replied_user"] is False
        # Discord echoes the bot's own messages over the gateway.
        await fake.wait_for(lambda: len(bot.own) == 2)
        assert {m.content for m in bot.own} == {"private answer", "public answer"}

        async with dm.channel.typing():
            pass
        assert fake.typing == [dm.channel.id]


async def test_edit_updates_state_and_over_long_content_is_refused(
    fake: FakeDiscord, bot: Bot
) -> None:
    channel = bot.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("draft")
    edited = await sent.edit(content="final")
    assert edited.content == "final"
    stored = fake.bot_messages(CHANNEL_ID)[0]
    assert (stored.content, stored.edits, stored.versions) == ("final", 1, ["draft", "final"])
    await fake.wait_for(lambda: bot.edits)
    assert bot.edits[0].message_id == sent.id

    with pytest.raises(discord.HTTPException) as too_long:
        await sent.edit(content="x" * 2001)
    assert (too_long.value.status, too_long.value.code) == (400, 50035)
    with pytest.raises(discord.HTTPException) as too_long_post:
        await channel.send("y" * 2001)
    assert too_long_post.value.code == 50035
    assert fake.bot_texts(CHANNEL_ID) == ["final"]
    await sent.edit(content="z" * 2000)  # exactly the limit is fine
    assert fake.fast_edits(min_gap=5.0) == 1  # two PATCHes (one refused) within 5 s


async def test_429_with_via_is_retried_by_discord_py(fake: FakeDiscord, bot: Bot) -> None:
    channel = bot.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("one")
    fake.rate_limit_next("PATCH /channels/*/messages/*", retry_after=0.3)
    await sent.edit(content="two")
    patches = fake.calls_to("PATCH /channels/*/messages/*")
    assert [c.status for c in patches] == [429, 200]
    assert patches[1].at - patches[0].at >= 0.3
    assert fake.bot_texts(CHANNEL_ID) == ["two"]


async def test_429_without_via_is_not_retried(fake: FakeDiscord, bot: Bot) -> None:
    channel = bot.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)
    fake.rate_limit_next("POST /channels/*/messages", retry_after=0.1, via=False)
    with pytest.raises(discord.HTTPException) as refused:
        await channel.send("blocked")
    assert refused.value.status == 429
    assert len(fake.calls_to("POST /channels/*/messages")) == 1
    assert fake.bot_texts(CHANNEL_ID) == []


async def test_wrong_token_raises_login_failure(fake: FakeDiscord) -> None:
    client = discord.Client(intents=discord.Intents.default())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.login("not-the-token")
    finally:
        await client.close()
    assert [(c.path, c.status) for c in fake.calls] == [("/users/@me", 401)]
    assert fake.identify_count == 0


@pytest.mark.parametrize(
    ("knobs", "content"),
    [({"require_message_content": True}, False), ({"granted_intents": 0}, True)],
    ids=["knob-requires-intent", "intent-not-granted-in-portal"],
)
async def test_disallowed_intents_close_4014(knobs: dict[str, Any], content: bool) -> None:
    async with FakeDiscord(**knobs) as fake:
        with point_discord_at(fake):
            client = Bot(content=content)
            try:
                with pytest.raises(discord.PrivilegedIntentsRequired):
                    await asyncio.wait_for(client.start(TOKEN), 5)
            finally:
                await client.close()
    assert fake.close_codes == [4014]
    assert fake.session is None


async def test_without_message_content_guild_text_is_hidden_unless_mentioned(
    fake: FakeDiscord,
) -> None:
    async with running(Bot(content=False)) as bot:
        await fake.send_guild_message("plain")
        await fake.send_guild_message("hey bot", mention_bot=True)
        await fake.send_dm("private")
        await fake.wait_for(lambda: len(bot.received) == 3)
        plain, mention, dm = bot.received
        assert plain.content == ""
        assert mention.content == f"<@{BOT_ID}> hey bot"
        assert bot.user in mention.mentions
        assert dm.content == "private"


async def test_dropped_connection_resumes_and_replays_missed_events(
    fake: FakeDiscord, bot: Bot
) -> None:
    await fake.drop_connection()
    await fake.send_guild_message("sent while disconnected")  # kept for the replay
    await fake.wait_ready()
    assert (fake.identify_count, fake.resume_count) == (1, 1)
    assert fake.gateway_paths == ["/gw", "/gw/resume"]  # READY's resume_gateway_url
    await fake.send_guild_message("after the resume")
    await fake.wait_for(lambda: len(bot.received) == 2)
    assert [m.content for m in bot.received] == ["sent while disconnected", "after the resume"]

    await fake.send_reconnect()  # op 7
    await fake.wait_for(lambda: fake.resume_count == 2)
    await fake.wait_ready()
    await fake.send_dm("still here")
    await fake.wait_for(lambda: len(bot.received) == 3)

    await fake.close_gateway(4000)  # "unknown error": resumable
    await fake.wait_for(lambda: fake.resume_count == 3)
    await fake.wait_ready()
    assert fake.identify_count == 1
    assert fake.close_codes == [4000]


async def test_threads_and_replies_to_the_bot(fake: FakeDiscord, bot: Bot) -> None:
    await fake.send_guild_message("start a thread here")
    await fake.wait_for(lambda: bot.received)
    thread = await bot.received[0].create_thread(name="chat")
    assert thread.id == bot.received[0].id
    assert fake.channels[thread.id]["type"] == 11
    await thread.send("inside")
    assert fake.bot_texts(thread.id) == ["inside"]
    await fake.wait_for(
        lambda: isinstance(bot.get_channel(thread.id), discord.Thread)
    )  # THREAD_CREATE

    await fake.send_thread_message("in the old thread")
    await fake.wait_for(lambda: len(bot.received) == 2)
    assert isinstance(bot.received[1].channel, discord.Thread)
    assert bot.received[1].channel.id == THREAD_ID

    await fake.send_reply_to_bot("thanks", channel_id=thread.id)
    await fake.wait_for(lambda: len(bot.received) == 3)
    reply = bot.received[2]
    assert reply.reference is not None
    assert reply.reference.message_id == fake.bot_messages(thread.id)[0].id
    assert isinstance(reply.reference.resolved, discord.Message)
    assert reply.reference.resolved.author.id == BOT_ID


async def test_slash_commands_sync_and_interactions_are_answered(
    fake: FakeDiscord, bot: Bot
) -> None:
    tree = app_commands.CommandTree(bot)

    @tree.command(name="ping", description="Check the bot")
    async def ping(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("pong", ephemeral=True)

    @tree.command(name="ask", description="Ask a question")
    async def ask(interaction: discord.Interaction, prompt: str) -> None:
        await interaction.response.defer(thinking=True)
        await interaction.edit_original_response(content=f"answer: {prompt}")
        await interaction.followup.send("one more thing")

    synced = await tree.sync()
    assert sorted(c.name for c in synced) == ["ask", "ping"]
    assert len(fake.command_syncs) == 1
    assert fake.calls_to("PUT /applications/*/commands")
    assert {c["name"] for c in fake.commands} == {"ask", "ping"}

    pinged = await fake.send_slash_command("ping")
    await fake.wait_for(lambda: pinged.original is not None)
    assert pinged.response_type == 4
    assert pinged.callbacks[0]["data"]["flags"] == EPHEMERAL
    assert pinged.ephemeral
    assert pinged.original is not None
    assert pinged.original.content == "pong"

    asked = await fake.send_slash_command("ask", {"prompt": "why?"})
    await fake.wait_for(lambda: asked.followups)
    assert asked.response_type == 5
    assert asked.original is not None
    assert (asked.original.content, asked.original.edits) == ("answer: why?", 1)
    assert [m.content for m in asked.followups] == ["one more thing"]
    assert fake.bot_texts(CHANNEL_ID) == ["pong", "answer: why?", "one more thing"]


async def test_invalid_session_makes_the_client_identify_again(fake: FakeDiscord) -> None:
    class QuickBot(Bot):
        async def before_identify_hook(
            self, shard_id: int | None, *, initial: bool = False
        ) -> None:
            pass  # discord.py sleeps 5 s here before every non-initial IDENTIFY

    async with running(QuickBot()) as bot:
        await fake.send_invalid_session(resumable=False)
        await fake.wait_for(lambda: fake.identify_count == 2)
        await fake.wait_ready()
        assert fake.resume_count == 0
        assert fake.gateway_paths == ["/gw", "/gw"]  # back to DEFAULT_GATEWAY, not the resume URL
        await fake.send_dm("new session")
        await fake.wait_for(lambda: [m.content for m in bot.received] == ["new session"])


async def test_auto_sharded_client_reads_the_gateway_from_gateway_bot(fake: FakeDiscord) -> None:
    client = discord.AutoShardedClient(intents=discord.Intents.default(), guild_ready_timeout=0.05)
    task = asyncio.create_task(client.start(TOKEN))
    try:
        await fake.wait_ready()
        assert fake.calls_to("GET /gateway/bot")
        assert fake.session is not None
        assert fake.session.shard == [0, 1]
    finally:
        await client.close()
        await task


async def test_interaction_errors_match_discord(fake: FakeDiscord, bot: Bot) -> None:
    seen: list[discord.Interaction] = []
    tree = app_commands.CommandTree(bot)

    @tree.command(name="slow", description="Answers twice")
    async def slow(interaction: discord.Interaction) -> None:
        seen.append(interaction)

    await tree.sync()
    record = await fake.send_slash_command("slow")
    await fake.wait_for(lambda: seen)
    await seen[0].response.send_message("first")
    with pytest.raises(discord.InteractionResponded):  # discord.py guards a 2nd response itself
        await seen[0].response.send_message("second")
    async with aiohttp.ClientSession() as http:  # the fake refuses it too, as Discord does
        url = f"{fake.api_base}/interactions/{record.id}/{record.token}/callback"
        async with http.post(url, json={"type": 4, "data": {"content": "again"}}) as again:
            assert again.status == 400
            assert (await again.json())["code"] == 40060
    assert record.response_type == 4
    assert len(record.callbacks) == 1

    fake.interaction_deadline = 0.0
    late = await fake.send_slash_command("slow")
    await fake.wait_for(lambda: len(seen) == 2)
    with pytest.raises(discord.NotFound) as unknown:
        await seen[1].response.send_message("too late")
    assert unknown.value.code == 10062
    assert late.original is None
