"""HTTP details both LLM SDKs share: the placeholder key, retry-after, safe error
text, and which `ProviderError` an error status becomes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from urllib.parse import urlsplit

from chatbridge.providers.base import (
    ProviderError,
    ProviderMisconfigured,
    ProviderTimeout,
    ProviderUnavailable,
)

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


def status_error(
    name: str,
    *,
    model: str,
    status: int,
    error_type: object,
    message: object,
    code: object = None,
    secret: str | None,
) -> ProviderError:
    """The `ProviderError` for an HTTP error status the SDK gave up on (429 aside).

    5xx and 409 are transient, 408 is a timeout; every other 4xx is a
    `ProviderMisconfigured` whose message is the admin's one line, naming the
    config key to check.
    """
    detail = status_detail(status, error_type, message, secret)
    who = f"Provider {name!r}"
    if status == 408:
        return ProviderTimeout(f"{who} timed out on its side ({detail}).", provider=name)
    if status >= 500 or status == 409 or status < 400:
        return ProviderUnavailable(f"{who} failed ({detail}).", provider=name)
    entry = f"providers.{name}"
    if status == 401:
        reason, what, setting = "auth", "the API key was rejected", f"{entry}.api_key"
        check = setting
    elif status in (402, 403):
        reason, what = "permission", "the API key is not allowed to do this"
        setting = f"{entry}.api_key"
        check = f"{setting} (its account, plan and access to model {model!r})"
    elif status == 404 and _names_a_model(model, message, code):
        reason, what, setting = "model", f"model {model!r} not found", f"{entry}.model"
        check = setting
    elif status == 404:
        reason, what, setting = "endpoint", "the API endpoint was not found", f"{entry}.base_url"
        check = setting
    else:
        reason, what, setting = "request", "the request was rejected", f"{entry}.model"
        check = f"{setting} and {entry}.max_tokens"
    return ProviderMisconfigured(
        f"{entry}: {what} ({detail}); check {check}.",
        provider=name,
        reason=reason,
        setting=setting,
    )


def _names_a_model(model: str, message: object, code: object) -> bool:
    """Whether a 404 is about the model (OpenAI's `model_not_found`, Anthropic's
    "model: x", Ollama's "model "x" not found") rather than a wrong URL path."""
    if code == "model_not_found":
        return True
    text = message.lower() if isinstance(message, str) else ""
    return "model" in text or (bool(model) and model.lower() in text)


def media_accepted(kind: str, *, vision: bool, base_url: str | None) -> frozenset[str]:
    """What a provider entry takes besides text: "image" unless `vision: false`;
    "document" (PDF) on Anthropic and on OpenAI itself, whose Chat Completions
    take file inputs (compatible servers rarely do)."""
    accepts = {"image"} if vision else set()
    itself = base_url is None or urlsplit(base_url).hostname == "api.openai.com"
    if kind == "anthropic" or (kind == "openai" and itself):
        accepts.add("document")
    return frozenset(accepts)
