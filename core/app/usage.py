"""`chatbridge usage`: tokens, requests, refusals, cost and what is left, from the store.

It reads the ledger (`core.ledger`) and the `bot` (time zone), `memory`,
`identities`, `access`, `limits` and `scopes` sections only (`USAGE_SECTIONS`), so like
the memory commands it needs no platform or provider secret. Costs are what
the ledger settled at each provider's prices when the request was answered;
`cost_usd` is null for an account that used tokens but has no cost recorded
(no prices were configured). `left` is today's and this month's remainder of
each limit in force now (whatever `--since` says).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chatbridge.config import ChatbridgeConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.ledger import NANO, Account, Hold, Limits, Tally
from chatbridge.core.limits import LimitPolicy
from chatbridge.core.ports.store import Store

__all__ = ["CSV_HEADER", "USAGE_SECTIONS", "UsageLine", "render", "usage_lines"]

USAGE_SECTIONS = ("bot", "memory", "identities", "access", "limits", "scopes")
CSV_HEADER = ("kind", "id", "tokens_in", "tokens_out", "requests", "refused", "cost_usd")
PERSON, SCOPE = "person:", "scope:"


@dataclass(frozen=True, slots=True)
class UsageLine:
    kind: str  # "person" | "scope"
    id: str
    tally: Tally
    left: dict[str, float]

    @property
    def cost_usd(self) -> float | None:
        if self.tally.nano_usd == 0 and self.tally.tokens:
            return None
        return round(self.tally.nano_usd / NANO, 9)

    def as_json(self) -> dict[str, Any]:
        t = self.tally
        return {
            "id": self.id,
            "tokens_in": t.tokens_in,
            "tokens_out": t.tokens_out,
            "requests": t.requests,
            "refused": t.refused,
            "cost_usd": self.cost_usd,
            "left": self.left,
        }


async def usage_lines(
    store: Store,
    *,
    config: ChatbridgeConfig,
    policy: LimitPolicy,
    access: AccessPolicy,
    since: float,
    person: str | None = None,
    now: float | None = None,
) -> list[UsageLine]:
    """One line per account with use since `since` (epoch s), people first."""
    tz = _tz(config)
    now = time.time() if now is None else now
    since_day = datetime.fromtimestamp(since, tz).date().isoformat()
    totals: dict[str, Tally] = {}
    for row in await store.ledger_rows(since_day=since_day):
        totals[row.account] = totals.get(row.account, Tally()) + row.tally
    if person is not None:
        totals = {k: v for k, v in totals.items() if k == f"{PERSON}{person}"}
    today = datetime.fromtimestamp(now, tz).date().isoformat()
    lines = []
    for account in sorted(totals, key=lambda k: (not k.startswith(PERSON), k)):
        kind, _, ident = account.partition(":")
        limits = _limits_of(kind, ident, policy, access, config)
        probe = Hold("", (Account(account, limits),), 0, 0, today, today[:7], now, now)
        snap = (await store.ledger_snapshots(probe))[account]
        left: dict[str, float] = {}
        for key, limit, used in (
            ("tokens_per_day", limits.tokens_per_day, snap.day.tokens + snap.held_day[0]),
            ("tokens_per_month", limits.tokens_per_month, snap.month.tokens + snap.held_month[0]),
            ("messages_per_minute", limits.messages_per_minute, snap.recent),
        ):
            if limit is not None:
                left[key] = max(0, limit - used)
        for key, dollars, nano in (
            ("usd_per_day", limits.usd_per_day, snap.day.nano_usd + snap.held_day[1]),
            ("usd_per_month", limits.usd_per_month, snap.month.nano_usd + snap.held_month[1]),
        ):
            if dollars is not None:
                left[key] = round(max(0.0, dollars - nano / NANO), 6)
        lines.append(UsageLine(kind, ident, totals[account], left))
    return lines


def _limits_of(
    kind: str, ident: str, policy: LimitPolicy, access: AccessPolicy, config: ChatbridgeConfig
) -> Limits:
    if kind != "person":  # a pool: the `limits` of the scope it is named after, if still set
        scope = config.scopes.get(ident)
        pool = scope.limits if scope is not None else None
        return Limits() if pool is None else Limits(**pool.model_dump())
    if policy.admins_exempt and access.is_admin_id(ident):
        return Limits()
    return policy.limits_of(ident, ident)


def _tz(config: ChatbridgeConfig) -> Any:
    import zoneinfo

    return zoneinfo.ZoneInfo(config.bot.timezone) if config.bot.timezone else None


def render(lines: Iterable[UsageLine], fmt: str) -> str:
    """The report as `table`, `json` or `csv` (see the contract for the shapes)."""
    lines = list(lines)
    if fmt == "json":
        doc = {
            "people": [x.as_json() for x in lines if x.kind == "person"],
            "scopes": [x.as_json() for x in lines if x.kind == "scope"],
        }
        return json.dumps(doc, indent=2, ensure_ascii=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for x in lines:
            cost = "" if x.cost_usd is None else f"{x.cost_usd:.6f}"
            t = x.tally
            writer.writerow([x.kind, x.id, t.tokens_in, t.tokens_out, t.requests, t.refused, cost])
        return out.getvalue().rstrip("\n")
    head = ("KIND", "ID", "TOKENS IN", "TOKENS OUT", "REQUESTS", "REFUSED", "COST USD", "LEFT")
    rows = [head]
    for x in lines:
        t = x.tally
        cost = "–" if x.cost_usd is None else f"{x.cost_usd:.4f}"
        left = ", ".join(f"{k}={v:g}" for k, v in x.left.items()) or "unlimited"
        rows.append(
            (x.kind, x.id, str(t.tokens_in), str(t.tokens_out), str(t.requests),
             str(t.refused), cost, left)
        )  # fmt: skip
    if len(rows) == 1:
        return "no usage recorded in this period"
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
