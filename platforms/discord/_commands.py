"""Slash commands: `/new /forget /memory /help /status /link /unlink` as Discord
application commands (`/link` with an optional `code` option).

An interaction is deferred at once (Discord wants an answer within 3 s),
then handed to the engine as the text command it stands for
(`event_id` = the interaction id), answered through the interaction's
webhook. Every command reply is ephemeral: they reveal memory or status, and
an access denial is for the asker only. The command set is synced only when
it differs from what Discord holds (every sync counts against a daily quota).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import discord
from discord import app_commands

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import PlatformLimits, SentMessage
from chatbridge.platforms._runtime import one_line

from ._outbox import MAX_CHARS, discord_delivery

__all__ = ["InteractionOutbox", "build_tree", "decode_interaction", "sync_if_changed"]

log = logging.getLogger(__name__)

TakeIn = Callable[[IncomingMessage], Awaitable[bool]]
"""Hands a command to the inbox (the adapter's `take`); False when it was refused."""


def build_tree(
    client: discord.Client, commands: Sequence[tuple[str, str]], take: TakeIn
) -> app_commands.CommandTree[Any]:
    """A command tree whose every command defers and hands `/name` to `take`."""
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    for name, description in commands:
        command = name.lstrip("/").lower()
        tree.add_command(
            app_commands.Command(
                name=command,
                description=(description or command)[:100],
                callback=_link_runner(take) if command == "link" else _runner(command, take),
            )
        )
    return tree


def _runner(command: str, take: TakeIn) -> Any:
    async def run(interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        await take(interaction_message(interaction, f"/{command}"))

    return run


def _link_runner(take: TakeIn) -> Any:
    """`/link` takes an optional `code` option: `/link` offers a code, `/link code:X` redeems."""

    @app_commands.describe(code="the code /link gave you on your other platform")
    async def run(interaction: discord.Interaction, code: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        text = f"/link {code.strip()}" if code and code.strip() else "/link"
        await take(interaction_message(interaction, text))

    return run


def interaction_message(interaction: discord.Interaction, text: str) -> IncomingMessage:
    """The engine's view of a slash command: like a message with `text`, from its channel."""
    channel = interaction.channel
    channel_id = interaction.channel_id or 0
    thread = ""
    chat = str(channel_id)
    server = () if interaction.guild_id is None else (f"discord:guild:{interaction.guild_id}",)
    place: tuple[str, ...] = (f"discord:{channel_id}", *server, "discord")
    if isinstance(channel, discord.Thread):
        chat, thread = str(channel.parent_id or channel_id), str(channel_id)
        place = (f"discord:{channel_id}", f"discord:{chat}", *server, "discord")
    kind = ChatKind.PRIVATE if interaction.guild_id is None else ChatKind.GROUP
    address = {"app": interaction.application_id, "token": interaction.token, "c": channel_id}
    return IncomingMessage(
        conversation=Conversation(
            platform="discord", chat=chat, user=str(interaction.user.id), thread=thread, kind=kind
        ),
        text=text,
        event_id=str(interaction.id),
        reply_address=json.dumps(address),
        order=interaction.id,  # a snowflake, in the same order as messages
        place=place,
    )


def decode_interaction(address: str) -> tuple[int, str] | None:
    """`(application id, interaction token)` of an interaction reply address, else None."""
    try:
        data = json.loads(address)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str):
        return None
    return int(data["app"]), data["token"]


class InteractionOutbox:
    """Answers a deferred slash command with ephemeral followups (token valid 15 min).

    A `SentMessage` is the followup's message id; errors map as `DiscordOutbox`'s do.
    Discord shows "thinking…" until the first followup, so `typing()` does nothing.
    """

    def __init__(
        self, client: discord.Client, app_id: int, token: str, *, edit_interval: float = 1.0
    ) -> None:
        self.limits = PlatformLimits(max_chars=MAX_CHARS, edit_interval=edit_interval)
        self._hook = discord.Webhook.partial(app_id, token, client=client)
        # What `Interaction.followup` builds: an application webhook may send ephemerally.
        self._hook.type = discord.WebhookType.application
        self._delivery = discord_delivery()

    async def send(self, text: str) -> SentMessage:
        async def call() -> SentMessage:
            sent = await self._hook.send(text, ephemeral=True, wait=True)
            return str(int(sent.id))

        return await self._delivery.call("followup", "", call)

    async def edit(self, message: SentMessage, text: str) -> None:
        try:
            message_id = int(message)
        except ValueError:
            message_id = int(message.rpartition(":")[2] or 0)

        async def call() -> None:
            await self._hook.edit_message(message_id, content=text)

        await self._delivery.call("followup edit", "", call)

    async def typing(self) -> None:
        return None


def _shape(commands: Sequence[dict[str, Any]]) -> set[tuple[str, str, int]]:
    return {
        (str(c.get("name")), str(c.get("description")), int(c.get("type", 1))) for c in commands
    }


async def sync_if_changed(client: discord.Client, tree: app_commands.CommandTree[Any]) -> bool:
    """PUTs the command set only when Discord's differs; True when it synced.

    A failure is logged, not raised: typed commands work without slash commands.
    """
    app_id = client.application_id
    if app_id is None:
        return False
    wanted = [c.to_dict(tree) for c in tree.get_commands()]
    try:
        current = await client.http.get_global_commands(app_id)
        if _shape(current) == _shape(wanted):  # type: ignore[arg-type]
            log.debug("discord: slash commands unchanged; not syncing")
            return False
        await tree.sync()
    except Exception as exc:
        log.warning("discord: could not sync slash commands: %s", one_line(exc))
        return False
    log.info("discord: synced %d slash commands", len(wanted))
    return True
