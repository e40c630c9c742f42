"""Linking: one person across platforms, by their own choice (`/link`, `/unlink`).

A linked person is a group of platform IDs under one person key (the ID that
offered the code, while it stays linked). Each ID keeps writing its ring
entries under its own key; a person's ring is read as the union of its
members' rings, in time order. So linking shows both histories at once, and
unlinking gives each ID exactly the entries written from it, with nothing to
copy or split in the store. Limits count on the person key.

Codes: 10 letters/digits from an alphabet without look-alikes (50 bits),
valid `CODE_TTL` seconds, single-use, stored only as their SHA-256. Five wrong
codes (`LOCK_AFTER`) lock `/link` for the sender for `LOCK_FOR` seconds. An ID
under a YAML identity is joined by the admin's config, which always wins: it
cannot /link or /unlink.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from chatbridge.core.access import AccessPolicy
from chatbridge.core.models import Conversation, MemoryEntry
from chatbridge.core.ports.store import Store

__all__ = [
    "CODE_TTL",
    "LOCK_AFTER",
    "LOCK_FOR",
    "LinkBook",
    "People",
    "Person",
    "code_hash",
    "new_code",
]

CODE_TTL = 600.0
LOCK_AFTER = 5
LOCK_FOR = 3600.0
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 10


def new_code() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(CODE_LENGTH))


def code_hash(code: str) -> str:
    """What the store keeps of a code (typed codes are upper-cased first)."""
    return hashlib.sha256(f"chatbridge-link:{code.strip().upper()}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Person:
    """Who a message is from: `key` counts limits; `ring_keys` are read as one ring."""

    key: str
    ring_keys: tuple[str, ...]
    linked: bool = False


class People:
    """Resolves senders: a YAML identity first, then a link in the store, else the ID."""

    def __init__(self, access: AccessPolicy, store: Store) -> None:
        self._access = access
        self._store = store

    async def of(self, conversation: Conversation) -> Person:
        fixed = self.fixed(conversation)
        if fixed is not None:
            return Person(fixed, (fixed,))
        return await self._linked(conversation.user_id)

    def fixed(self, conversation: Conversation) -> str | None:
        """The sender's person key when the config alone decides it (a YAML
        identity, an ID no link can name); None when a link in the store may."""
        ring_user = self._access.ring_user(conversation)
        if ring_user != conversation.user_id:  # a YAML identity (or the console as someone)
            return ring_user
        resolved = self._access.resolve(ring_user)
        if resolved != ring_user or ":" not in ring_user:
            return resolved
        return None

    async def of_id(self, user: str) -> Person:
        """For a CLI `--user`: an identity name, or any ID of a linked person."""
        resolved = self._access.resolve(user)
        if resolved != user or ":" not in user:
            return Person(resolved, (resolved,))
        return await self._linked(user)

    async def _linked(self, user: str) -> Person:
        group = await self._store.link_group(user)
        if not group:
            return Person(user, (user,))
        return Person(group[0], tuple(group[1:]), linked=True)

    async def ring(self, person: Person, *, since: float) -> list[MemoryEntry]:
        """The person's entries newer than `since`, oldest first (one ring per ID, merged)."""
        if len(person.ring_keys) == 1:
            return await self._store.ring(person.ring_keys[0], since=since)
        merged: list[MemoryEntry] = []
        for key in person.ring_keys:
            merged += await self._store.ring(key, since=since)
        return sorted(merged, key=lambda e: e.timestamp)


@dataclass(slots=True)
class LinkBook:
    """Links, codes and attempts in memory (the JSON store keeps it in its own file).

    `person[user]` is the person key of every linked ID (the key's own ID too),
    `codes[hash] = (user, expires_at)`, `attempts[user] = (failures, locked_until)`.
    """

    person: dict[str, str] = field(default_factory=dict)
    codes: dict[str, tuple[str, float]] = field(default_factory=dict)
    attempts: dict[str, tuple[int, float]] = field(default_factory=dict)

    def offer(self, user: str, hashed: str, expires_at: float, now: float) -> None:
        self.codes = {h: c for h, c in self.codes.items() if c[0] != user and c[1] > now}
        self.codes[hashed] = (user, expires_at)

    def take(self, hashed: str, now: float) -> str | None:
        found = self.codes.pop(hashed, None)
        return found[0] if found is not None and found[1] > now else None

    def attempt(self, user: str, now: float, failed: bool) -> float | None:
        failures, locked_until = self.attempts.get(user, (0, 0.0))
        if locked_until > now:
            return locked_until
        if not failed:
            return None
        failures += 1
        if failures >= LOCK_AFTER:
            self.attempts[user] = (0, now + LOCK_FOR)
            return now + LOCK_FOR
        self.attempts[user] = (failures, 0.0)
        return None

    def join(self, first: str, second: str) -> str:
        root = self.person.get(first, first)
        old = self.person.get(second)
        moving = [u for u, p in self.person.items() if old is not None and p == old] or [second]
        self.person[first] = root
        for user in moving:
            self.person[user] = root
        self.attempts.pop(second, None)
        return root

    def split(self, user: str) -> bool:
        old = self.person.pop(user, None)
        if old is None:
            return False
        rest = sorted(u for u, p in self.person.items() if p == old)
        if len(rest) == 1:
            del self.person[rest[0]]
        elif old == user:  # the person key left: the next member carries it
            for member in rest:
                self.person[member] = rest[0]
        return True

    def group(self, user: str) -> tuple[str, ...]:
        key = self.person.get(user)
        if key is None:
            return ()
        return (key, *sorted(u for u, p in self.person.items() if p == key))
