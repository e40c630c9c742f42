"""The limits ledger's values and its one decision, shared by every store backend.

A ledger is a set of accounts (a person, `person:<who>`, or a scope's pool,
`scope:<place>`), each with counters per calendar day and month
(`2026-12-02`, `2026-12`): tokens in/out, requests, refusals and cost in
nano-dollars (integers, so every backend adds them exactly). Before a model
request a `Hold` reserves the worst case on every account it touches; the
store admits it only if, on every account, settled use plus unexpired holds
plus this one stays within each limit, in one atomic step (one SQLite
transaction, one Redis script), so concurrent messages and replicas cannot
pass a limit together. `Settlement` replaces the hold with what the provider
reported. A hold a crash left behind stops counting at `expires_at`.

`decide` is that check over numbers a backend read; SQLite and the JSON store
make it inside their transaction (`LedgerBook.reserve`), the Redis script
spells the same rules.

A limited message builds a `Hold`, a `Settlement` and its `Tally`: plain
slotted classes, not frozen ones (a frozen dataclass's `__init__` sets each
field through `object.__setattr__`, several times the cost), and nothing
changes one after it is built. `Limits` and `Account` are built once per
policy and stay frozen (hashable: the Redis store keys its packed commands
by accounts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "PERSON_PREFIX",
    "RATE_WINDOW",
    "Account",
    "Hold",
    "LedgerBook",
    "LedgerRow",
    "Limits",
    "Settlement",
    "Snapshot",
    "Tally",
    "Used",
    "Verdict",
    "decide",
    "moved",
]

RATE_WINDOW = 60.0
"""`messages_per_minute` counts admitted requests in this sliding window (s);
also how often a person past it hears the notice."""
NANO = 10**9  # nano-dollars per dollar


@dataclass(frozen=True, slots=True)
class Limits:
    """One account's limits; None is unlimited. Dollars as floats (config)."""

    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    messages_per_minute: int | None = None
    usd_per_day: float | None = None
    usd_per_month: float | None = None

    @property
    def any(self) -> bool:
        return any(
            v is not None
            for v in (
                self.tokens_per_day,
                self.tokens_per_month,
                self.messages_per_minute,
                self.usd_per_day,
                self.usd_per_month,
            )
        )


@dataclass(frozen=True, slots=True)
class Account:
    key: str  # "person:alice", "scope:telegram:-100123"
    limits: Limits


@dataclass(slots=True)
class Hold:
    """A reservation of the worst case of one model request on `accounts`."""

    id: str
    accounts: tuple[Account, ...]
    tokens: int
    nano_usd: int
    day: str
    month: str
    now: float
    expires_at: float
    # A platform ID whose link in the store names the person: the store reads
    # it in the reserve's own atomic step (one round trip on Redis) and
    # reserves only if the first account is that person's (`PERSON_PREFIX` +
    # the person key, the ID itself while unlinked); else nothing is written
    # and the verdict's `moved` names the person found. "" when the caller
    # knows the person without the store (a YAML identity).
    sender: str = ""


PERSON_PREFIX = "person:"
"""A person's ledger account: `person:` + the person key."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """`ok`, or which account and limit key refused; `notify` is False for a
    `messages_per_minute` refusal within `RATE_WINDOW` of the last notice.
    `moved` (not ok, nothing written) is the person key the store found for
    `Hold.sender` when the hold was not on that person's account."""

    ok: bool
    account: str = ""
    kind: str = ""
    notify: bool = True
    moved: str | None = None


def moved(hold: Hold, person: str) -> Verdict | None:
    """The `moved` verdict when `person` (the store's person key for
    `hold.sender`) is not whose the hold's first account is; else None."""
    if hold.accounts[0].key == PERSON_PREFIX + person:
        return None
    return Verdict(False, moved=person)


@dataclass(slots=True)
class Settlement:
    """What a request used, replacing its hold. `answered` False (a failed or
    cancelled request) also takes the message out of `messages_per_minute`."""

    id: str
    accounts: tuple[str, ...]
    day: str
    month: str
    tokens_in: int
    tokens_out: int
    nano_usd: int
    answered: bool = True

    @property
    def tally(self) -> Tally:
        """What it adds to each account's day and month: one request."""
        return Tally(self.tokens_in, self.tokens_out, 1, 0, self.nano_usd)


@dataclass(slots=True)
class Tally:
    """One account's counters for one period."""

    tokens_in: int = 0
    tokens_out: int = 0
    requests: int = 0
    refused: int = 0
    nano_usd: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.requests + other.requests,
            self.refused + other.refused,
            self.nano_usd + other.nano_usd,
        )


Counted = Mapping[str, tuple["Tally", "Tally"]]
"""Settled use per account: (the hold's day, the hold's month)."""
Used = Mapping[str, tuple[list[int], list[int]]]
"""What a reserve reads of each account's settled use: [tokens, nano-dollars]
of the hold's day and of its month (a backend's cache of them may hand over
its own lists: `reserve` only reads them)."""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One account's counters for one day, for `chatbridge usage`."""

    account: str
    day: str
    tally: Tally


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What `decide` needs of one account: settled use of the hold's day and
    month, unexpired holds of that day and month, admitted requests in the
    last `RATE_WINDOW` s, and when it was last told about the rate."""

    day: Tally = field(default_factory=Tally)
    month: Tally = field(default_factory=Tally)
    held_day: tuple[int, int] = (0, 0)  # tokens, nano-dollars
    held_month: tuple[int, int] = (0, 0)
    recent: int = 0
    noticed_at: float | None = None


def decide(hold: Hold, snapshots: Mapping[str, Snapshot]) -> Verdict:
    """Admit `hold` only if it fits every limit of every account."""
    for account in hold.accounts:
        s = snapshots[account.key]
        kind = _first_exceeded(
            hold,
            account.limits,
            s.day.tokens + s.held_day[0],
            s.day.nano_usd + s.held_day[1],
            s.month.tokens + s.held_month[0],
            s.month.nano_usd + s.held_month[1],
            s.recent,
        )
        if kind:
            return _refused(hold, account.key, kind, s.noticed_at)
    return _ADMITTED


_ADMITTED = Verdict(True)
_ZERO = Tally()


def _refused(hold: Hold, key: str, kind: str, noticed_at: float | None) -> Verdict:
    notify = True
    if kind == "messages_per_minute":
        notify = noticed_at is None or hold.now - noticed_at >= RATE_WINDOW
    return Verdict(False, key, kind, notify)


def _first_exceeded(
    hold: Hold,
    lim: Limits,
    day_tokens: int,
    day_nano: int,
    month_tokens: int,
    month_nano: int,
    recent: int,
) -> str:
    """The first limit the hold would pass, given each period's use so far
    (settled plus held); "" if none. Plain ifs in the limits' order: this
    runs for every message."""
    if lim.messages_per_minute is not None and recent + 1 > lim.messages_per_minute:
        return "messages_per_minute"
    if lim.tokens_per_day is not None and day_tokens + hold.tokens > lim.tokens_per_day:
        return "tokens_per_day"
    if lim.tokens_per_month is not None and month_tokens + hold.tokens > lim.tokens_per_month:
        return "tokens_per_month"
    if lim.usd_per_day is not None:
        if day_nano + hold.nano_usd > round(lim.usd_per_day * NANO):
            return "usd_per_day"
    if lim.usd_per_month is not None:
        if month_nano + hold.nano_usd > round(lim.usd_per_month * NANO):
            return "usd_per_month"
    return ""


@dataclass(slots=True)
class HoldRow:
    day: str
    month: str
    tokens: int
    nano_usd: int
    expires_at: float


@dataclass(slots=True)
class LedgerBook:
    """The whole ledger in memory (the JSON store keeps it in its own file).

    `counters[account][period]`, `holds[account][id]`, `stamps[account][id]`
    (admission time), `notices[account]` (last rate notice).
    """

    counters: dict[str, dict[str, Tally]] = field(default_factory=dict)
    holds: dict[str, dict[str, HoldRow]] = field(default_factory=dict)
    stamps: dict[str, dict[str, float]] = field(default_factory=dict)
    notices: dict[str, float] = field(default_factory=dict)

    def reserve(self, hold: Hold, used: Used | None = None) -> Verdict:
        """Decide and record `hold`. With `used` (each account's settled day
        and month, kept elsewhere: SQLite's file) the book holds only holds,
        stamps and notices, and a refusal is for the caller to count.

        `decide` over `snapshot`s, spelled out without building them: this
        runs for every limited message."""
        now, day, month = hold.now, hold.day, hold.month
        for account in hold.accounts:
            key = account.key
            if used is not None:
                settled_day, settled_month = used[key]
                day_tokens, day_nano = settled_day[0], settled_day[1]
                month_tokens, month_nano = settled_month[0], settled_month[1]
            else:
                counters = self.counters.get(key) or {}
                counted_day = counters.get(day, _ZERO)
                counted_month = counters.get(month, _ZERO)
                day_tokens, day_nano = counted_day.tokens, counted_day.nano_usd
                month_tokens, month_nano = counted_month.tokens, counted_month.nano_usd
            holds = self.holds.get(key)
            if holds:  # mostly empty: the last message's hold was settled
                _prune_holds(holds, now)  # after it every hold left counts
                held = _held(holds, day, month)
                day_tokens, day_nano = day_tokens + held[0], day_nano + held[1]
                month_tokens, month_nano = month_tokens + held[2], month_nano + held[3]
            stamps = self.stamps.get(key)
            recent = 0
            if stamps:
                cutoff = now - RATE_WINDOW
                if next(iter(stamps.values())) <= cutoff:  # the oldest is out of the window
                    _prune_stamps(stamps, cutoff)
                recent = len(stamps)
            kind = _first_exceeded(
                hold, account.limits, day_tokens, day_nano, month_tokens, month_nano, recent
            )
            if kind:
                verdict = _refused(hold, key, kind, self.notices.get(key))
                if used is None:
                    keys = [a.key for a in hold.accounts]
                    self._add(keys, day, month, Tally(refused=1))
                if verdict.notify and kind == "messages_per_minute":
                    self.notices[key] = now
                return verdict
        row = HoldRow(day, month, hold.tokens, hold.nano_usd, hold.expires_at)
        for account in hold.accounts:
            key = account.key
            holds = self.holds.get(key)
            if holds is None:
                holds = self.holds[key] = {}
            holds[hold.id] = row
            stamps = self.stamps.get(key)
            if stamps is None:
                stamps = self.stamps[key] = {}
            stamps[hold.id] = now
        return _ADMITTED

    def settle(self, s: Settlement) -> None:
        self.release(s)
        self._add(s.accounts, s.day, s.month, s.tally)

    def release(self, s: Settlement) -> None:
        """Drop the hold (and, unanswered, its stamp) without counting anything."""
        for key in s.accounts:
            holds = self.holds.get(key)
            if holds:
                holds.pop(s.id, None)
            if not s.answered:
                stamps = self.stamps.get(key)
                if stamps:
                    stamps.pop(s.id, None)

    def snapshot(self, key: str, hold: Hold, counted: Counted | None = None) -> Snapshot:
        """What `decide` needs of `key` at `hold.now`; expired holds and stamps
        outside the window are dropped first (`_prune`)."""
        self._prune(key, hold.now)  # after it every hold and stamp left counts
        if counted is not None:
            day, month = counted[key]
        else:
            counters = self.counters.get(key) or {}
            day, month = counters.get(hold.day, _ZERO), counters.get(hold.month, _ZERO)
        holds = self.holds.get(key)
        held = _held(holds, hold.day, hold.month) if holds else (0, 0, 0, 0)
        stamps = self.stamps.get(key)
        return Snapshot(
            day,
            month,
            (held[0], held[1]),
            (held[2], held[3]),
            len(stamps) if stamps else 0,
            self.notices.get(key),
        )

    def rows(self, *, since_day: str) -> list[LedgerRow]:
        return [
            LedgerRow(account, period, tally)
            for account, periods in sorted(self.counters.items())
            for period, tally in sorted(periods.items())
            if len(period) == 10 and period >= since_day
        ]

    def _prune(self, key: str, now: float) -> None:
        holds = self.holds.get(key)
        if holds:
            _prune_holds(holds, now)
        stamps = self.stamps.get(key)
        if stamps:
            _prune_stamps(stamps, now - RATE_WINDOW)

    def _add(self, keys: Iterable[str], day: str, month: str, tally: Tally) -> None:
        for key in keys:
            periods = self.counters.setdefault(key, {})
            for period in (day, month):
                periods[period] = periods.get(period, Tally()) + tally


def _held(holds: Mapping[str, HoldRow], day: str, month: str) -> tuple[int, int, int, int]:
    """What `holds` reserve: tokens and nano-dollars in `day`, then in `month`."""
    day_tokens = day_nano = month_tokens = month_nano = 0
    for row in holds.values():
        if row.day == day:
            day_tokens += row.tokens
            day_nano += row.nano_usd
        if row.month == month:
            month_tokens += row.tokens
            month_nano += row.nano_usd
    return day_tokens, day_nano, month_tokens, month_nano


def _prune_holds(holds: dict[str, HoldRow], now: float) -> None:
    """Drop the holds expired at `now`."""
    expired = [h for h, row in holds.items() if row.expires_at <= now]
    for hid in expired:
        del holds[hid]


def _prune_stamps(stamps: dict[str, float], cutoff: float) -> None:
    """Drop the stamps at or before `cutoff`. They are added in time order
    (dicts keep it): drop from the front."""
    old = []
    for sid, at in stamps.items():
        if at > cutoff:
            break
        old.append(sid)
    for sid in old:
        del stamps[sid]
