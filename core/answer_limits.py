"""The answer path's side of `core.limits`: whose accounts a message is held
against, the one sentence when a limit refuses it, and settling its hold.

`Answerer` asks twice per message with limits: `refused_before_download`
before a message's images are fetched (a read, nothing reserved), then
`admit` with the request it built; the hold is settled with the exchange's
commit (`settlement`) or, when no exchange is stored, by itself (`settle`).
"""

from __future__ import annotations

import logging

from chatbridge.core.access import AccessPolicy
from chatbridge.core.delivery import send_text
from chatbridge.core.ledger import Account, Settlement
from chatbridge.core.limits import Admitted, LimitGate, Meter
from chatbridge.core.media import accepted_media, images_to_fetch
from chatbridge.core.metrics import Metrics
from chatbridge.core.models import InboxEntry, Turn
from chatbridge.core.places import PlaceSettings
from chatbridge.core.ports import Outbox, Prompt
from chatbridge.core.ports.store import Store, StoreError

__all__ = ["AnswerLimits"]

log = logging.getLogger(__name__)


class AnswerLimits:
    def __init__(
        self, gate: LimitGate, *, store: Store, access: AccessPolicy, metrics: Metrics
    ) -> None:
        self._gate = gate
        self._store = store
        self._access = access
        self._metrics = metrics

    async def refused_before_download(
        self, entry: InboxEntry, outbox: Outbox, place: PlaceSettings, person: str, text: str
    ) -> bool:
        """Whether the message was refused because its images alone cannot
        fit a limit, before any of them is downloaded (one read of the ledger).

        Its least possible request is the system prompt, its `text` (as the
        user turn carries it) and its images at the provider's per-image
        reservation; the request built after the downloads is at least that.
        When that does not fit, `admit` decides for good (it counts the
        refusal and says the one sentence); if it fits after all (an answer
        ended meanwhile), that hold is settled at once as an unanswered
        request of no tokens and the message goes on."""
        settings = place.settings
        images = images_to_fetch(entry.message, settings.media, accepted_media(place.provider))
        if not images:
            return False
        least = Prompt(system=settings.system_prompt, messages=(Turn("user", text),))
        accounts = self._accounts(entry, person, place)
        verdict = await self._gate.could_admit(least, accounts=accounts, images=images)
        if verdict.ok:
            return False
        admitted = await self.admit(entry, outbox, least, person, place, images=images)
        if admitted is None:
            return True
        await self.settle(admitted, Meter(), completed=False)
        return False

    async def admit(
        self,
        entry: InboxEntry,
        outbox: Outbox,
        prompt: Prompt,
        person: str,
        place: PlaceSettings,
        *,
        images: int | None = None,
    ) -> Admitted | None:
        """Reserve the request's worst case on the person's account and the
        place's pool; None (after at most one sentence; the caller closes the
        entry, nothing is stored) when a limit refuses it."""
        conversation = entry.message.conversation
        accounts = self._accounts(entry, person, place)
        admitted = await self._gate.admit(prompt, accounts=accounts, images=images)
        if isinstance(admitted, Admitted):
            return admitted
        log.info("limit %s refused a message in %s", admitted.kind, conversation.chat_id)
        self._metrics.limit_refusals.labels(kind=admitted.kind).inc()
        if admitted.notify:
            language = place.settings.language
            sentence = self._gate.refusal(admitted, language=language, accounts=accounts)
            await send_text(outbox, sentence)
        return None

    def settlement(self, admitted: Admitted, meter: Meter, *, completed: bool) -> Settlement:
        return self._gate.settlement(admitted, meter, completed=completed)

    async def settle(self, admitted: Admitted, meter: Meter, *, completed: bool) -> None:
        """Settle the hold by itself; a store failure leaves it to expire (`hold_ttl`)."""
        try:
            await self._store.ledger_settle(
                self._gate.settlement(admitted, meter, completed=completed)
            )
        except StoreError as exc:
            log.warning("usage not settled (the hold expires by itself): %s", exc)

    def _accounts(
        self, entry: InboxEntry, person: str, place: PlaceSettings
    ) -> tuple[Account, ...]:
        conversation = entry.message.conversation
        # Whether the sender is an admin matters only when admins are exempt.
        admin = self._gate.policy.admins_exempt and self._access.is_admin(conversation)
        return self._gate.accounts(person, conversation.user_id, admin=admin, place=place)
