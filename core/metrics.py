"""Prometheus metrics for `GET /metrics` (prometheus_client, own registry).

Labels carry only the platform, the outcome, the scope and provider names —
never user IDs or message text, so the metrics endpoint leaks nothing about
anyone. The scope label is a configured scope ID or `default`, so its
cardinality is bounded by the config file.
"""

from __future__ import annotations

from collections import OrderedDict

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from chatbridge.core.models import Usage
from chatbridge.core.outcome import Outcome

__all__ = ["CONTENT_TYPE_LATEST", "LastUsage", "Metrics"]

LAST_USAGE_KEPT = 10_000  # conversations whose last answer's usage /status can show

# Outcomes of one incoming message, as the engine decided it (`core.outcome`).
OUTCOMES = tuple(outcome.value for outcome in Outcome)


class LastUsage:
    """The usage of each conversation's last answer, in memory (for `/status`).

    Never exported: the Prometheus counters carry no conversation. Bounded to
    the `LAST_USAGE_KEPT` most recently answered conversations; empty after a
    restart (the store keeps the daily totals, not this).
    """

    def __init__(self, limit: int = LAST_USAGE_KEPT) -> None:
        self._usage: OrderedDict[str, Usage] = OrderedDict()
        self._limit = limit

    def remember(self, conversation_key: str, usage: Usage) -> None:
        self._usage.pop(conversation_key, None)
        self._usage[conversation_key] = usage
        while len(self._usage) > self._limit:
            self._usage.popitem(last=False)

    def get(self, conversation_key: str) -> Usage | None:
        return self._usage.get(conversation_key)


class Metrics:
    """One registry per app (no module-level singletons, tests get their own)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.messages = Counter(
            "chatbridge_messages",
            "Incoming messages by platform, outcome and scope.",
            ["platform", "outcome", "scope"],
            registry=self.registry,
        )
        self.reply_seconds = Histogram(
            "chatbridge_reply_seconds",
            "From a message's arrival to its answer being fully delivered.",
            ["platform"],
            buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
            registry=self.registry,
        )
        self.tokens = Counter(
            "chatbridge_tokens",
            "Tokens used, by direction (input/output) and scope.",
            ["direction", "scope"],
            registry=self.registry,
        )
        self.cached_tokens = Counter(
            "chatbridge_cached_input_tokens",
            "Input tokens the providers read from their prompt cache (part of the input tokens).",
            registry=self.registry,
        )
        self.last_usage = LastUsage()
        # Labelled children as `labels` returned them (label values are bounded
        # by the config: platforms, outcomes, scopes).
        self._counted: dict[tuple[str, str, str], Counter] = {}
        self._tokens: dict[str, tuple[Counter, Counter]] = {}
        self._replies: dict[str, Histogram] = {}
        self.limit_refusals = Counter(
            "chatbridge_limit_refusals",
            "Messages not sent to a model because a limit refused them, by limit kind "
            "(tokens_per_day, tokens_per_month, messages_per_minute, usd_per_day, usd_per_month).",
            ["kind"],
            registry=self.registry,
        )
        self.catch_ups = Counter(
            "chatbridge_catch_ups",
            "Catch-up passes over a platform's history (on start, after a lost session).",
            ["platform"],
            registry=self.registry,
        )
        self.caught_up = Counter(
            "chatbridge_caught_up_messages",
            "Messages a catch-up read from a platform's history, by what became of them: "
            "taken (into the inbox), duplicate (held already), ignored (not addressed to "
            "the bot, or its own), refused (the inbox could not take it).",
            ["platform", "outcome"],
            registry=self.registry,
        )

    def count(self, platform: str, outcome: str, *, scope: str = "default") -> None:
        key = (platform, outcome, scope)
        child = self._counted.get(key)
        if child is None:  # `labels` resolves them by name on every call: once per set
            child = self.messages.labels(platform=platform, outcome=outcome, scope=scope)
            self._counted[key] = child
        child.inc()

    def count_usage(self, conversation_key: str, usage: Usage, *, scope: str = "default") -> None:
        """One answer's tokens: the counters, and that conversation's last usage."""
        pair = self._tokens.get(scope)
        if pair is None:
            pair = (
                self.tokens.labels(direction="input", scope=scope),
                self.tokens.labels(direction="output", scope=scope),
            )
            self._tokens[scope] = pair
        pair[0].inc(usage.input_tokens)
        pair[1].inc(usage.output_tokens)
        self.cached_tokens.inc(usage.cached_input_tokens)
        self.last_usage.remember(conversation_key, usage)

    def observe_reply(self, platform: str, seconds: float) -> None:
        """From a message's arrival to its answer being fully delivered."""
        child = self._replies.get(platform)
        if child is None:
            child = self._replies[platform] = self.reply_seconds.labels(platform=platform)
        child.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
