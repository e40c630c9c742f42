"""The `limits:` section and provider `prices`, as their own models.

`LimitValues` is the one set of limit keys; `limits.default`,
`limits.people.<who>` (and a scope's `limits` pool) are each one of them.
A key not set is unlimited; a `people` entry overrides `default` key by key.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from ._base import Section
from ._errors import Loc
from ._ids import AccessEntry

__all__ = ["LIMIT_KEYS", "LimitValues", "LimitsConfig", "Prices", "usd_limit_issues"]

MAX_TOKENS_LIMIT = 10**15
MAX_USD_LIMIT = 10.0**9

LIMIT_KEYS = (
    "tokens_per_day",
    "tokens_per_month",
    "messages_per_minute",
    "usd_per_day",
    "usd_per_month",
)


class LimitValues(Section):
    """What one person (or one scope's shared pool) may use; unset is unlimited."""

    tokens_per_day: int | None = Field(default=None, ge=0, le=MAX_TOKENS_LIMIT)
    """Prompt + answer tokens per calendar day (bot.timezone); 0: no model answers."""
    tokens_per_month: int | None = Field(default=None, ge=0, le=MAX_TOKENS_LIMIT)
    """Prompt + answer tokens per calendar month (bot.timezone)."""
    messages_per_minute: int | None = Field(default=None, ge=0, le=100_000)
    """Answered messages in any 60 s; commands and refused messages do not count."""
    usd_per_day: float | None = Field(default=None, ge=0, le=MAX_USD_LIMIT)
    """US dollars per calendar day, at the providers' `prices` (every provider needs them)."""
    usd_per_month: float | None = Field(default=None, ge=0, le=MAX_USD_LIMIT)
    """US dollars per calendar month, at the providers' `prices`."""

    def over(self, base: LimitValues) -> LimitValues:
        """These values where set, `base`'s elsewhere (key by key)."""
        merged = {key: getattr(base, key) for key in LIMIT_KEYS}
        merged |= {key: getattr(self, key) for key in self.model_fields_set}
        return LimitValues(**merged)

    @property
    def uses_usd(self) -> bool:
        return self.usd_per_day is not None or self.usd_per_month is not None


class LimitsConfig(Section):
    """Per-person limits; a scope's own `limits` is a pool shared by its place."""

    default: LimitValues = LimitValues()
    """Everyone without an entry of their own."""
    people: dict[AccessEntry, LimitValues] = Field(default_factory=dict)
    """An identity name or a platform:id -> the keys that differ from `default`."""
    admins_exempt: bool = False
    """Admins (access.admins) are held by no limit (their use is still counted)."""


class Prices(Section):
    """What a provider entry costs, in US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0, le=100_000)
    """Prompt tokens (cached ones included, at this price: an upper bound)."""
    output_per_mtok: float = Field(ge=0, le=100_000)
    """Answer tokens."""


def usd_limit_issues(
    limits: LimitsConfig,
    unpriced: list[str],
    *,
    identities: dict[str, object],
    pools: Mapping[str, LimitValues] | None = None,
) -> list[tuple[Loc, str]]:
    """Cross-section checks: `usd_*` (in `limits` or a scope's pool) needs
    prices on every provider that may answer (`unpriced` names those
    without), and a `people` name must be an identity."""
    issues: list[tuple[Loc, str]] = []
    places: list[tuple[Loc, LimitValues]] = [(("limits", "default"), limits.default)]
    places += [(("limits", "people", who), values) for who, values in limits.people.items()]
    places += [(("scopes", scope, "limits"), values) for scope, values in (pools or {}).items()]
    for loc, values in places:
        if values.uses_usd and unpriced:
            key = "usd_per_day" if values.usd_per_day is not None else "usd_per_month"
            names = ", ".join(f"providers.{name}" for name in unpriced)
            issues.append(((*loc, key), f"needs prices on every provider; {names} has none"))
    for who in limits.people:
        if ":" not in who and who not in identities:
            issues.append((("limits", "people", who), f"no identity named {who!r}"))
    return issues
