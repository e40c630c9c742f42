"""Limits on the answer path: reserve the worst case, settle what was reported.

`LimitGate.admit` turns a prompt into a `core.ledger.Hold` on the person's
account (and a scope's pool): the prompt's tokens, bounded from above, plus
the largest `max_tokens` of the provider chain, and the dearest provider's
price for that. The store admits it atomically or says which limit refused.
`LimitGate.settle` replaces the hold with what the providers reported, each
at its own price (a fallback provider's usage at the fallback's prices):

- an answer that ended normally without any usage report settles the full
  worst case (the contract's rule: nothing unreported goes uncounted);
- a failed or cancelled request settles what was reported before it ended,
  else zero, and leaves `messages_per_minute` (it was not answered).

Prompt tokens: neither installed SDK offers a local tokenizer (Anthropic's
counts over the network; OpenAI's `tiktoken` is not a dependency and fetches
its tables at run time), so the bound is the prompt's UTF-8 byte count plus 8
per message and 16 for the request: every byte-level BPE token (OpenAI's and
Anthropic's tokenizers are such) covers at least one byte, so the real count
never exceeds it. It over-reserves about 4x for English text; settling gives
the difference back as soon as the answer ends.

Images: every image part of the prompt (the message's own and those a live
session still shows) counts its provider's `ProviderTerms.image_tokens`, the
most one image can cost there whatever its size (`core.media.image_tokens`);
the provider's report, image tokens included, settles it. A message with
images is checked against what is left (`LimitGate.could_admit`) before its
images are downloaded, so one that cannot fit is refused without fetching.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from chatbridge.core.clock import Clock
from chatbridge.core.ledger import (
    NANO,
    PERSON_PREFIX,
    Account,
    Hold,
    Limits,
    Settlement,
    Snapshot,
    Verdict,
    decide,
)
from chatbridge.core.models import Usage
from chatbridge.core.places import PlaceSettings
from chatbridge.core.ports import Prompt, StreamEvent, UsageReport
from chatbridge.core.ports.store import Store, StoreError
from chatbridge.core.texts import say

__all__ = [
    "DEFAULT_HOLD_TTL",
    "POOL_PREFIX",
    "LimitGate",
    "LimitPolicy",
    "Meter",
    "Price",
    "ProviderTerms",
    "Remainder",
    "images_in",
    "pool_of",
    "prompt_tokens_bound",
    "utf8_bytes",
]

POOL_PREFIX = "scope:"
"""A pool's ledger account: `scope:` + the ID of the scope that set `limits`."""
_LIMIT_FIELDS = frozenset(f.name for f in dataclasses.fields(Limits))

_ACCOUNTS_KEPT = 10_000  # cached senders' accounts before the cache starts over
_RELINKS = 5  # reserves one message tries while links keep changing under it

DEFAULT_HOLD_TTL = 300.0
"""Seconds a reservation counts when nobody settles it (its process died)."""


def pool_of(place: PlaceSettings) -> Account | None:
    """The shared pool in force in `place`, or None.

    The pool belongs to the scope that set `limits` (its source), not to the
    most specific scope matched: a channel inheriting its server's `limits`
    draws on the server's one pool, `scope:discord:guild:ID`, with every other
    channel there. A channel setting its own `limits` has its own pool.
    """
    values = place.values.get("limits")
    if not isinstance(values, Mapping):
        return None
    limits = Limits(**{k: v for k, v in values.items() if k in _LIMIT_FIELDS})
    return Account(f"{POOL_PREFIX}{place.sources['limits']}", limits)


def prompt_tokens_bound(prompt: Prompt) -> int:
    """An upper bound on the prompt's tokens (see the module docstring)."""
    messages = prompt.messages
    size = 8 * len(messages) + 16 + utf8_bytes(prompt.system)
    return size + sum(map(utf8_bytes, map(_CONTENT, messages)))


def utf8_bytes(text: str) -> int:
    """`text`'s length in UTF-8 (a lone surrogate as 3 bytes).

    Asked for every limited message over every turn of the session: an
    ASCII text (a flag Python keeps) is a byte per character, and another
    is encoded once and looked up after that. The store keeps a live
    session's turns, so the next messages ask again for the same strings,
    whose hash Python keeps too: only the newest turns are encoded."""
    return len(text) if text.isascii() else _encoded_length(text)


@functools.lru_cache(maxsize=128)
def _encoded_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def images_in(prompt: Prompt) -> int:
    """Image parts in the prompt, over all its turns."""
    if not any(map(_PARTS, prompt.messages)):  # the common case, without a Python loop
        return 0
    return sum(1 for turn in prompt.messages for part in turn.parts if part.kind == "image")


_CONTENT = operator.attrgetter("content")
_PARTS = operator.attrgetter("parts")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def nano(self, tokens_in: int, tokens_out: int) -> int:
        """Cost in nano-dollars, rounded up."""
        dollars_per_k = tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok
        return math.ceil(dollars_per_k * 1e3)


@dataclass(frozen=True, slots=True)
class ProviderTerms:
    """What one provider entry may cost: its answer bound, prices (None:
    unknown) and the most one image costs it in prompt tokens (0: it takes none)."""

    max_tokens: int = 1024
    price: Price | None = None
    image_tokens: int = 0


_NO_TERMS = ProviderTerms()


@dataclass(frozen=True, slots=True)
class LimitPolicy:
    """The `limits` section and the providers' terms, resolved once per config."""

    default: Limits = field(default_factory=Limits)
    people: Mapping[str, Limits] = field(default_factory=dict)  # merged over default
    admins_exempt: bool = False
    terms: Mapping[str, ProviderTerms] = field(default_factory=dict)  # by provider name
    first: str = ""  # the provider a report without a name came from
    hold_ttl: float = DEFAULT_HOLD_TTL
    # Derived from `terms` once (`worst` runs for every limited message): the
    # largest `max_tokens` and the priced terms.
    _answer_bound: int = field(init=False, repr=False, compare=False)
    _priced: tuple[ProviderTerms, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        terms = self.terms.values() or (_NO_TERMS,)
        object.__setattr__(self, "_answer_bound", max(t.max_tokens for t in terms))
        object.__setattr__(self, "_priced", tuple(t for t in terms if t.price is not None))

    def limits_of(self, person: str, user_id: str) -> Limits:
        """`people[person]`, else `people[user_id]`, else `default`."""
        return self.people.get(person) or self.people.get(user_id) or self.default

    def worst(self, prompt_tokens: int, images: int = 0) -> tuple[int, int]:
        """Tokens and nano-dollars the request may cost at most, whichever provider answers."""
        if not images:  # the common case
            tokens = prompt_tokens + self._answer_bound
            if not self._priced:
                return tokens, 0
            return tokens, max(t.price.nano(prompt_tokens, t.max_tokens) for t in self._priced)  # type: ignore[union-attr]
        terms = self.terms.values() or (_NO_TERMS,)
        tokens = max(prompt_tokens + images * t.image_tokens + t.max_tokens for t in terms)
        nanos = [
            t.price.nano(prompt_tokens + images * t.image_tokens, t.max_tokens)
            for t in terms
            if t.price is not None
        ]
        return tokens, max(nanos, default=0)

    def worst_input(self, prompt_tokens: int, images: int) -> int:
        """The most prompt tokens any provider of the chain may count."""
        if not images:
            return prompt_tokens
        terms = self.terms.values() or (_NO_TERMS,)
        return prompt_tokens + images * max(t.image_tokens for t in terms)

    def cost(self, provider: str, usage: Usage) -> int:
        terms = self.terms.get(provider or self.first)
        if terms is None or terms.price is None:
            return 0
        return terms.price.nano(usage.input_tokens, usage.output_tokens)


class Meter:
    """What the providers reported during one request, by provider name."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, Usage]] = []

    def see(self, event: StreamEvent) -> None:
        if isinstance(event, UsageReport):
            self.reports.append((event.provider, event.usage))

    @property
    def usage(self) -> Usage:
        total = Usage()
        for _, usage in self.reports:
            total = total + usage
        return total


@dataclass(frozen=True, slots=True)
class Remainder:
    """What is left of the smallest day (and month) limits, for /status."""

    tokens_today: int | None = None
    usd_today: float | None = None
    tokens_month: int | None = None
    usd_month: float | None = None


@dataclass(slots=True)  # one per limited message: not frozen (see core.ledger)
class Admitted:
    hold: Hold
    prompt_tokens: int


class LimitGate:
    """Admits and settles model requests against the ledger in the store."""

    def __init__(
        self,
        policy: LimitPolicy,
        *,
        store: Store,
        clock: Clock,
        timezone: tzinfo | None,
    ) -> None:
        self.policy = policy
        # Hold ids: unique across replicas and restarts, without a urandom call each.
        self._id_prefix = uuid.uuid4().hex[:12]
        self._ids = itertools.count()
        self._store = store
        self._clock = clock
        self._tz = timezone
        # Per message otherwise: the sender's accounts (the policy is fixed for
        # this gate's life; a reload builds a new gate) and the day and month
        # of the current clock second (a period starts on a whole second).
        self._accounts: dict[tuple[str, str, bool, str, object], tuple[Account, ...]] = {}
        self._second: tuple[int, str, str] = (-1, "", "")
        # Linked IDs' person keys as the store last named them: only the first
        # guess of `admit_sender`, which the store checks in the reserve itself.
        self._persons: dict[str, str] = {}

    def accounts(
        self, person: str, user_id: str, *, admin: bool, place: PlaceSettings | None = None
    ) -> tuple[Account, ...]:
        """The person's account and, where the place's scope sets `limits`, its
        pool (see `pool_of`). An exempt admin is held by neither, but both
        still count the admin's use."""
        exempt = admin and self.policy.admins_exempt
        values = place.values.get("limits") if place is not None else None
        source = place.sources.get("limits", "") if place is not None else ""
        key = (person, user_id, exempt, source, values)
        try:
            return self._accounts[key]
        except (KeyError, TypeError):  # TypeError: `values` not hashable
            pass
        limits = Limits() if exempt else self.policy.limits_of(person, user_id)
        own = Account(f"{PERSON_PREFIX}{person}", limits)
        pool = pool_of(place) if place is not None else None
        found = (own,) if pool is None else (own, Account(pool.key, Limits()) if exempt else pool)
        if len(self._accounts) > _ACCOUNTS_KEPT:
            self._accounts.clear()
        try:
            self._accounts[key] = found
        except TypeError:
            pass
        return found

    def periods(self, now: float) -> tuple[str, str]:
        second = int(now)
        cached = self._second
        if cached[0] == second:
            return cached[1], cached[2]
        day = datetime.fromtimestamp(now, self._tz).date().isoformat()
        self._second = (second, day, day[:7])
        return day, day[:7]

    async def admit(
        self,
        prompt: Prompt,
        *,
        accounts: tuple[Account, ...],
        sender: str = "",
        images: int | None = None,
    ) -> Admitted | Verdict:
        """Reserve the worst case of `prompt` (with `images` images, by default
        its image parts); a refusing `Verdict` if it does not fit (or a
        `moved` one: see `Hold.sender`)."""
        count = images_in(prompt) if images is None else images
        return await self._reserve(prompt_tokens_bound(prompt), count, accounts, sender)

    async def _reserve(
        self, bound: int, images: int, accounts: tuple[Account, ...], sender: str
    ) -> Admitted | Verdict:
        """`admit` of a prompt measured at `bound` tokens with `images` images."""
        hold = self._hold(bound, images, accounts, self._clock.now(), self._next_id(), sender)
        verdict = await self._store.ledger_reserve(hold)
        if not verdict.ok:
            return verdict
        return Admitted(hold, self.policy.worst_input(bound, images))

    def _next_id(self) -> str:
        return f"{self._id_prefix}-{next(self._ids)}"

    async def could_admit(
        self, prompt: Prompt, *, accounts: tuple[Account, ...], images: int
    ) -> Verdict:
        """Whether a request of at least `prompt` with `images` images fits
        what is left now on `accounts`, without reserving anything (one
        read): asked before a message's images are downloaded. `admit` still
        decides for good."""
        now = self._clock.now()
        hold = self._hold(prompt_tokens_bound(prompt), images, accounts, now, "", "")
        return decide(hold, await self._store.ledger_snapshots(hold))

    def _hold(
        self,
        prompt_tokens: int,
        images: int,
        accounts: tuple[Account, ...],
        now: float,
        hid: str,
        sender: str,
    ) -> Hold:
        tokens, nano = self.policy.worst(prompt_tokens, images)
        day, month = self.periods(now)
        expires = now + self.policy.hold_ttl
        return Hold(hid, accounts, tokens, nano, day, month, now, expires, sender)

    async def admit_sender(
        self,
        prompt: Prompt,
        *,
        user_id: str,
        person: str | None,
        admin: bool,
        place: PlaceSettings | None = None,
        images: int | None = None,
    ) -> tuple[Admitted | Verdict, tuple[Account, ...]]:
        """`admit` on the sender's accounts, and those accounts (for `refusal`).

        `person` None: the store reads `user_id`'s link inside the reserve
        (`Hold.sender`), so the answer path makes no lookup of its own and a
        link made by another replica counts from the next message. The hold
        goes first on the person this gate last heard of (the ID itself,
        unless linked); when the store names another, it is asked again on
        that person's accounts, having written nothing."""
        sender = "" if person is not None else user_id
        key = person if person is not None else self._persons.get(user_id, user_id)
        # Measured once, whichever person the store names.
        count = images_in(prompt) if images is None else images
        bound = prompt_tokens_bound(prompt)
        for _ in range(_RELINKS):
            accounts = self.accounts(key, user_id, admin=admin, place=place)
            result = await self._reserve(bound, count, accounts, sender)
            if isinstance(result, Admitted) or result.moved is None:
                return result, accounts
            key = result.moved
            if len(self._persons) > _ACCOUNTS_KEPT:
                self._persons.clear()
            if key == user_id:
                self._persons.pop(user_id, None)
            else:
                self._persons[user_id] = key
        raise StoreError(f"the links of {user_id} kept changing during {_RELINKS} reserves")

    def settlement(self, admitted: Admitted, meter: Meter, *, completed: bool) -> Settlement:
        """What replaces the hold (see the module docstring for the rules)."""
        hold = admitted.hold
        reports = meter.reports
        if len(reports) == 1:  # the common case, without summing
            name, usage = reports[0]
            nano = self.policy.cost(name, usage)
            tokens_in, tokens_out = usage.input_tokens, usage.output_tokens
        elif reports:
            usage = meter.usage
            nano = sum(self.policy.cost(name, u) for name, u in reports)
            tokens_in, tokens_out = usage.input_tokens, usage.output_tokens
        elif completed:  # answered, but nothing reported: count the worst case
            tokens_in, tokens_out = admitted.prompt_tokens, hold.tokens - admitted.prompt_tokens
            nano = hold.nano_usd
        else:
            tokens_in = tokens_out = nano = 0
        accounts = hold.accounts
        return Settlement(
            hold.id,
            (accounts[0].key,) if len(accounts) == 1 else tuple([a.key for a in accounts]),
            hold.day,
            hold.month,
            tokens_in,
            tokens_out,
            nano,
            answered=completed,
        )

    async def remainder(self, accounts: tuple[Account, ...]) -> Remainder | None:
        """The least left today and this month over `accounts`; None without limits."""
        if not any(a.limits.any for a in accounts):
            return None
        now = self._clock.now()
        day, month = self.periods(now)
        probe = Hold("", accounts, 0, 0, day, month, now, now)
        snaps = await self._store.ledger_snapshots(probe)
        left: dict[str, float] = {}
        for account in accounts:
            s, lim = snaps[account.key], account.limits
            for key, value in _left(s, lim).items():
                left[key] = min(left.get(key, value), value)
        return Remainder(
            tokens_today=_int(left.get("tokens_per_day")),
            usd_today=left.get("usd_per_day"),
            tokens_month=_int(left.get("tokens_per_month")),
            usd_month=left.get("usd_per_month"),
        )

    # -- what the user hears --------------------------------------------------

    def refusal(self, verdict: Verdict, *, language: str, accounts: tuple[Account, ...]) -> str:
        """The one sentence for a refusing verdict, naming the limit and its reset."""
        pool = verdict.account.startswith(POOL_PREFIX)
        whose = "pool" if pool else "own"
        if verdict.kind == "messages_per_minute":
            account = next(a for a in accounts if a.key == verdict.account)
            return say(
                language,
                "limit_rate",
                limit=say(language, f"limit_{whose}"),
                count=account.limits.messages_per_minute,
            )
        return say(
            language,
            "limit_refused",
            limit=say(language, f"limit_{whose}_{verdict.kind}"),
            reset=self._reset(verdict.kind, language),
        )

    def _reset(self, kind: str, language: str) -> str:
        today = datetime.fromtimestamp(self._clock.now(), self._tz).date()
        zone = _zone_name(self._tz)
        if kind.endswith("_day"):
            return say(language, "limit_reset_day", zone=zone)
        first = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
        shown = first.strftime("%d.%m.%Y") if language == "de" else first.isoformat()
        return say(language, "limit_reset_month", date=shown, zone=zone)

    def status_lines(self, remainder: Remainder, *, language: str) -> str:
        """`left today: 1200 tokens` (and the month with prices), for /status."""
        lines = []
        for key, tokens, usd in (
            ("limit_left_today", remainder.tokens_today, remainder.usd_today),
            ("limit_left_month", remainder.tokens_month, remainder.usd_month),
        ):
            parts = []
            if tokens is not None:
                parts.append(say(language, "limit_tokens", count=tokens))
            if usd is not None:
                parts.append(f"${usd:.2f}")
            if parts and (key == "limit_left_today" or usd is not None):
                lines.append(say(language, key, left=", ".join(parts)))
        return "\n".join(lines)


def _left(s: Snapshot, lim: Limits) -> dict[str, float]:
    left: dict[str, float] = {}
    if lim.tokens_per_day is not None:
        left["tokens_per_day"] = max(0, lim.tokens_per_day - s.day.tokens - s.held_day[0])
    if lim.tokens_per_month is not None:
        left["tokens_per_month"] = max(0, lim.tokens_per_month - s.month.tokens - s.held_month[0])
    if lim.usd_per_day is not None:
        left["usd_per_day"] = max(0.0, lim.usd_per_day - (s.day.nano_usd + s.held_day[1]) / NANO)
    if lim.usd_per_month is not None:
        used = (s.month.nano_usd + s.held_month[1]) / NANO
        left["usd_per_month"] = max(0.0, lim.usd_per_month - used)
    return left


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _zone_name(tz: tzinfo | None) -> str:
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    return (tz and tz.tzname(None)) or datetime.now().astimezone().tzname() or "local time"
