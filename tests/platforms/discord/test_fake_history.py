"""The fake serves `GET /channels/{id}/messages` as Discord does (checked with discord.py).

Newest first, at most 100 per request; with `after` the `limit` messages right
after it (discord.py pages upwards and reverses them), with `before` or no
anchor the newest ones below it.
"""

from __future__ import annotations

import aiohttp
import discord

from tests.platforms.discord.conftest import Launch
from tests.support.fake_discord import CHANNEL_ID, TOKEN, FakeDiscord


async def test_discord_py_pages_through_the_history_both_ways(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    ids = [int(fake.user_message(CHANNEL_ID, f"m{n}")["id"]) for n in range(250)]
    channel = running.platform.client.get_channel(CHANNEL_ID)
    assert isinstance(channel, discord.TextChannel)

    after = [m.id async for m in channel.history(limit=None, after=discord.Object(id=ids[9]))]
    assert after == ids[10:]  # oldest first, every one once
    pages = [c for c in fake.calls_to("GET /channels/*/messages") if "after" in c.query]
    assert [c.query["limit"] for c in pages] == ["100", "100", "100"]

    newest = [m.id async for m in channel.history(limit=120)]
    assert newest == ids[::-1][:120]  # newest first
    below = [
        m.id
        async for m in channel.history(
            limit=5, after=discord.Object(id=ids[200]), oldest_first=False
        )
    ]
    assert below == ids[::-1][:5]


async def test_the_limit_is_checked_as_discord_does(fake: FakeDiscord) -> None:
    fake.user_message(CHANNEL_ID, "one")
    headers = {"Authorization": f"Bot {TOKEN}"}
    url = f"{fake.api_base}/channels/{CHANNEL_ID}/messages"
    async with aiohttp.ClientSession(headers=headers) as http:
        for limit, status in (("0", 400), ("101", 400), ("100", 200), ("x", 400)):
            async with http.get(url, params={"limit": limit}) as response:
                assert response.status == status, limit
        async with http.get(url, params={"after": "1", "before": "9"}) as response:
            assert response.status == 400
        async with http.get(f"{fake.api_base}/channels/42/messages") as response:
            assert response.status == 404
