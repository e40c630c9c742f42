"""The two providers the scope scenarios (`tests/scenarios/test_scopes_*.py`)
route between, and how a test reads which one a request went to.

`main` is the run config's provider at its fake; `backup` is a second fake,
named by one scope (`provider: backup`) and `main`'s fallback. Each request
is then told apart by its model and system prompt.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import Body

__all__ = ["main_and_backup", "seen", "seen_by"]


def main_and_backup(backup: FakeOpenAI, *, api_key: str = "sk-test") -> dict[str, Any]:
    """The `providers` section: `main` (model gpt-main) by default with
    `backup` (model gpt-backup at the `backup` fake) as its fallback, both
    with `api_key` (a `${VAR}` for a test that checks the key stays out of
    the logs)."""
    return {
        "default": "main",
        "fallback": ["backup"],
        "main": {"model": "gpt-main", "api_key": api_key},
        "backup": {
            "type": "openai",
            "model": "gpt-backup",
            "api_key": api_key,
            "base_url": backup.base_url,
        },
    }


def seen(body: Body) -> tuple[str, str, str]:
    """(model, system prompt, last message) of one request body."""
    messages = body["messages"]
    return body["model"], messages[0]["content"], messages[-1]["content"]


def seen_by(fake: FakeOpenAI) -> list[tuple[str, str, str]]:
    """`seen` of every request `fake` got, in order."""
    return [seen(request.body) for request in fake.requests]
