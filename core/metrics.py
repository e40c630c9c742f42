"""Prometheus metrics for `GET /metrics` (prometheus_client, own registry).

Labels carry only the platform, the outcome and provider names — never user
IDs or message text, so the metrics endpoint leaks nothing about anyone.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Outcomes of one incoming message, as the engine decided it.
OUTCOMES = (
    "answered",
    "failed",
    "denied",
    "command",
    "duplicate",
    "cancelled",
    "undelivered",
    "late",
)


class Metrics:
    """One registry per app (no module-level singletons, tests get their own)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.messages = Counter(
            "chatbridge_messages",
            "Incoming messages by platform and outcome.",
            ["platform", "outcome"],
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
            "Tokens used, by direction (input/output).",
            ["direction"],
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

    def count(self, platform: str, outcome: str) -> None:
        self.messages.labels(platform=platform, outcome=outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
