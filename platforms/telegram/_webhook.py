"""The aiohttp endpoint Telegram POSTs updates to in webhook mode."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

Deliver = Callable[[dict[str, Any]], Awaitable[bool]]


class WebhookReceiver:
    """Checks the secret header and hands each update to `deliver`.

    Answers: 403 when the secret header is missing or wrong (nothing is
    delivered); 503 while not accepting (before start, after close) or when
    `deliver` returns False (the inbox could not take it), which makes
    Telegram keep the update and retry later; 400 for a body that is not a
    JSON object (also one nested deeper than the JSON parser goes); 200 once
    the update is in the inbox. No header or body a client sends gets a 500. `deliver` must not wait
    for the answer: Telegram times out slow webhooks and redelivers.
    """

    def __init__(self, secret: str, deliver: Deliver) -> None:
        if not secret:
            raise ValueError("a webhook without a secret would accept forged updates")
        self._secret = secret.encode()
        self._deliver = deliver
        self.accepting = False

    async def handle(self, request: web.Request) -> web.Response:
        # aiohttp hands header bytes that are not UTF-8 over as lone surrogates;
        # they round-trip to the bytes sent, which then simply do not match.
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        # Constant-time comparison: the secret must not leak through timing.
        if not hmac.compare_digest(given, self._secret):
            log.warning("telegram webhook: rejected a request without the right secret")
            return web.Response(status=403)
        if not self.accepting:
            return web.Response(status=503)
        try:
            data = json.loads(await request.read())
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            return web.Response(status=400)
        if not isinstance(data, dict):
            return web.Response(status=400)
        if "update_id" not in data:
            return web.Response(status=400)
        if not await self._deliver(data):
            return web.Response(status=503)
        return web.Response(status=200)
