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
from chatbridge.core.ledger import Settlement
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
        self,
        entry: InboxEntry,
        outbox: Outbox,
        place: PlaceSettings,
        text: str,
        *,
        person: str,
        fixed: str | None,
    ) -> bool:
        """Whether the message was refused because its images alone cannot
        fit a limit, before any of them is downloaded (one read of the ledger).

        Its least possible request is the system prompt, its `text` (as the
        user turn carries it) and its images at the provider's per-image
        reservation; the request built after the downloads is at least that.
        It is read against `person`'s accounts; when it does not fit, `admit`
        decides for good (it counts the refusal and says the one sentence);
        if it fits after all (an answer ended meanwhile), that hold is
        settled at once as an unanswered request of no tokens and the
        message goes on."""
        settings = place.settings
        images = images_to_fetch(entry.message, settings.media, accepted_media(place.provider))
        if not images:
            return False
        least = Prompt(system=settings.system_prompt, messages=(Turn("user", text),))
        accounts = self._gate.accounts(
            person, entry.message.conversation.user_id, admin=self._admin(entry), place=place
        )
        verdict = await self._gate.could_admit(least, accounts=accounts, images=images)
        if verdict.ok:
            return False
        admitted = await self.admit(entry, outbox, least, place, fixed=fixed, images=images)
        if admitted is None:
            return True
        await self.settle(admitted, Meter(), completed=False)
        return False

    async def admit(
        self,
        entry: InboxEntry,
        outbox: Outbox,
        prompt: Prompt,
        place: PlaceSettings,
        *,
        fixed: str | None,
        images: int | None = None,
    ) -> Admitted | None:
        """Reserve the request's worst case on the person's account and the
        place's pool; None (after at most one sentence; the caller closes the
        entry, nothing is stored) when a limit refuses it. `fixed`: the
        sender's person when no link can change it; else the store reads a
        linked sender's person within the reserve (`Hold.sender`)."""
        conversation = entry.message.conversation
        admitted, accounts = await self._gate.admit_sender(
            prompt,
            user_id=conversation.user_id,
            person=fixed,
            admin=self._admin(entry),
            place=place,
            images=images,
        )
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

    def _admin(self, entry: InboxEntry) -> bool:
        """Whether the sender is an exempt admin (asked only when admins are exempt)."""
        conversation = entry.message.conversation
        return self._gate.policy.admins_exempt and self._access.is_admin(conversation)
