"""`/link` and `/unlink`: a person joins their own platform IDs (see `core.links`).

The code is only ever in the bot's reply and the user's `/link CODE`
message; it is stored hashed, never logged, and commands never reach a model.
"""

from __future__ import annotations

from chatbridge.core.access import AccessPolicy
from chatbridge.core.clock import Clock
from chatbridge.core.links import CODE_TTL, code_hash, new_code
from chatbridge.core.memory import format_time
from chatbridge.core.models import ChatKind, IncomingMessage
from chatbridge.core.ports.store import Store
from chatbridge.core.settings import EngineSettings

__all__ = ["link", "unlink"]

_PLATFORMS = ("telegram", "discord", "slack")


def _refused(message: IncomingMessage, access: AccessPolicy, settings: EngineSettings) -> str:
    """The sentence when this sender cannot link here at all, else ""."""
    conversation = message.conversation
    if conversation.kind is not ChatKind.PRIVATE or conversation.platform not in _PLATFORMS:
        return settings.say("link_private_only")
    name = access.identity_of(conversation.user_id)
    if name is not None:
        return settings.say("link_identity", name=name)
    return ""


async def link(
    message: IncomingMessage,
    code: str,
    *,
    store: Store,
    access: AccessPolicy,
    clock: Clock,
    settings: EngineSettings,
) -> str:
    """`/link` offers a code; `/link CODE` joins this ID to the code's offerer."""
    refused = _refused(message, access, settings)
    if refused:
        return refused
    user, now = message.conversation.user_id, clock.now()
    locked = await store.link_attempt(user, now=now, failed=False)
    if locked is not None:
        return settings.say("link_locked", until=format_time(locked, settings.timezone))
    if not code:
        fresh = new_code()
        await store.link_offer(user, code_hash(fresh), expires_at=now + CODE_TTL)
        return settings.say("link_code", code=fresh)
    offerer = await store.link_take(code_hash(code), now=now)
    if offerer is None or access.identity_of(offerer) is not None:
        locked = await store.link_attempt(user, now=now, failed=True)
        if locked is not None:
            return settings.say("link_locked", until=format_time(locked, settings.timezone))
        return settings.say("link_wrong")
    if offerer == user:
        return settings.say("link_own")
    await store.link_join(offerer, user)
    return settings.say("link_done", first=offerer, second=user)


async def unlink(
    message: IncomingMessage, *, store: Store, access: AccessPolicy, settings: EngineSettings
) -> str:
    """This ID leaves its linked person; it keeps the entries written from it."""
    refused = _refused(message, access, settings)
    if refused:
        return refused
    user = message.conversation.user_id
    if await store.link_split(user):
        return settings.say("unlink_done", user=user)
    return settings.say("unlink_none", user=user)
