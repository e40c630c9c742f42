"""HTTP details both LLM SDKs share: the placeholder key, retry-after, safe error text."""

from __future__ import annotations

import math
from collections.abc import Mapping

# Local servers ignore the key, but the SDK refuses to start without one (or
# silently reads OPENAI_API_KEY from the environment).
PLACEHOLDER_KEY = "not-needed"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait: `retry-after-ms`, else numeric `retry-after`."""
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers[header]) / divisor
        except (KeyError, ValueError):
            continue
        return seconds if 0 <= seconds < math.inf else None
    return None  # absent, or an HTTP date: too rare to be worth parsing here


def status_detail(status: int, error_type: object, message: object, secret: str | None) -> str:
    """`HTTP 404 not_found_error: "model x"`: safe to log and to show an admin.

    Auth failures get no server text at all, because that is where servers echo
    (parts of) the key back; elsewhere the exact key is masked regardless.
    """
    detail = f"HTTP {status}"
    if isinstance(error_type, str) and error_type.replace("_", "").isalnum():
        detail += f" {error_type}"
    if isinstance(message, str) and message and status not in (401, 403):
        text = message.replace(secret, "***") if secret else message
        text = " ".join(text.split()).rstrip(".")
        detail += f': "{text[:120]}"'
    return detail
