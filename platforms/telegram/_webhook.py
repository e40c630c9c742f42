"""The endpoint Telegram POSTs updates to in webhook mode (a `Route` on chatbridge's server)."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from chatbridge.core.ports import WebRequest, WebResponse

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

Deliver = Callable[[dict[str, Any]], Awaitable[bool]]


class WebhookReceiver:
    """Checks the secret header and hands each update to `deliver`.

    Answers: 403 when the secret header is missing or wrong (nothing is
    delivered, the body is not read); 503 while not accepting (before start,
    after close) or when `deliver` returns False (the inbox could not take
    it), which makes Telegram keep the update and retry later; 400 for a
    body that is not a JSON object (also one nested deeper than the JSON
    parser goes); 200 once the update is in the inbox. No header or body a
    client sends gets a 500. `deliver` must not wait for the answer:
    Telegram times out slow webhooks and redelivers.
    """

    def __init__(self, secret: str, deliver: Deliver) -> None:
        if not secret:
            raise ValueError("a webhook without a secret would accept forged updates")
        self._secret = secret.encode()
        self._deliver = deliver
        self.accepting = False

    async def handle(self, request: WebRequest) -> WebResponse:
        # aiohttp hands header bytes that are not UTF-8 over as lone surrogates;
        # they round-trip to the bytes sent, which then simply do not match.
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        # Constant-time comparison: the secret must not leak through timing.
        if not hmac.compare_digest(given, self._secret):
            log.warning("telegram webhook: rejected a request without the right secret")
            return WebResponse(403)
        if not self.accepting:
            return WebResponse(503)
        try:
            data = json.loads(await request.read())
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            return WebResponse(400)
        if not isinstance(data, dict) or "update_id" not in data:
            return WebResponse(400)
        if not await self._deliver(data):
            return WebResponse(503)
        return WebResponse(200)
