"""Who may talk to the bot, and whose memory ring a message belongs to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from chatbridge.core.models import Conversation

__all__ = ["AccessPolicy"]

ALWAYS_ALLOWED_PLATFORMS = frozenset({"console"})


class AccessPolicy:
    """`access.allow` and `identities` from the config, resolved once.

    An allow entry is a user (`telegram:579304651`), a chat
    (`telegram:-100123`, `slack:C0123`) or an identity name. The console is
    always allowed: whoever runs `chatbridge chat` already owns the machine.
    """

    def __init__(
        self,
        *,
        allow: Iterable[str] = (),
        admins: Iterable[str] = (),
        identities: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._identity_of: dict[str, str] = {}
        for name, members in (identities or {}).items():
            for member in members:
                self._identity_of[member] = name
        self._allow = frozenset(allow)
        self._admins = frozenset(admins)

    def ring_user(self, conversation: Conversation) -> str:
        """One person, one ring: the identity name if configured, else platform:id.

        The console may act as another user (`chatbridge chat --user
        telegram:123` or `--user alice`) and then shares that user's ring.
        """
        if conversation.platform == "console" and conversation.user != "local":
            return self.resolve(conversation.user)
        return self._identity_of.get(conversation.user_id, conversation.user_id)

    def resolve(self, user: str) -> str:
        """A CLI user argument (`platform:id` or identity name) -> ring owner."""
        return self._identity_of.get(user, user)

    def ring_keys(self, user: str) -> set[str]:
        """Every key the person's data may be stored under: the identity name
        and each member ID (data from before the identity was configured stays
        under the plain ID). `forget` erases all of them."""
        name = self.resolve(user)
        members = {m for m, owner in self._identity_of.items() if owner == name}
        return {user, name, *members}

    def identity_of(self, user_id: str) -> str | None:
        """The YAML identity `user_id` belongs to, if any."""
        return self._identity_of.get(user_id)

    def is_admin(self, conversation: Conversation) -> bool:
        """The sender is in `access.admins` (by ID or identity name)."""
        return not {conversation.user_id, self.ring_user(conversation)}.isdisjoint(self._admins)

    def is_admin_id(self, person: str) -> bool:
        """`person` (a ring owner: identity name or platform:id) is an admin."""
        members = {m for m, owner in self._identity_of.items() if owner == person}
        return not ({person} | members).isdisjoint(self._admins)

    def allowed(self, conversation: Conversation) -> bool:
        if conversation.platform in ALWAYS_ALLOWED_PLATFORMS:
            return True
        candidates = {
            conversation.user_id,
            conversation.chat_id,
            self.ring_user(conversation),
        }
        return not candidates.isdisjoint(self._allow | self._admins)
