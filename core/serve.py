"""`chatbridge run`: serve every enabled platform until SIGINT/SIGTERM.

Shutdown order: stop receiving (platforms), let replies in flight finish for
`engine.shutdown_grace`, close providers, flush and close the store.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Mapping

from aiohttp import web

from config import ChatbridgeConfig
from core.app import engine_from_config
from core.engine import Engine
from core.metrics import CONTENT_TYPE_LATEST
from platforms.base import Platform

__all__ = ["serve"]

log = logging.getLogger(__name__)


class PlatformStartError(Exception):
    """A platform could not start (bad token, unreachable API); one sentence."""


def build_platforms(
    config: ChatbridgeConfig, engine: Engine, server: web.Application
) -> list[Platform]:
    platforms: list[Platform] = []
    telegram = config.platforms.telegram
    if telegram.enabled:
        from platforms.telegram import TelegramPlatform

        platforms.append(
            TelegramPlatform(
                config=telegram,
                engine=engine,
                server=server,
                drain_timeout=config.engine.shutdown_grace,
            )
        )
    for name in ("discord", "slack"):
        if getattr(config.platforms, name).enabled:
            log.warning("platforms.%s is enabled but not available in this build; skipped", name)
    return platforms


def _health_app(engine: Engine) -> web.Application:
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=engine.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


def _say(sentence: str) -> None:
    """A start-up failure: one sentence on stderr, as the CLI promises."""
    print(f"chatbridge: {sentence}", file=sys.stderr, flush=True)


async def _close_quietly(platform: Platform) -> None:
    try:
        await platform.aclose()
    except Exception as exc:  # shutting down anyway; say what failed
        log.warning("%s did not close cleanly: %s", platform.name, exc)


async def serve(config: ChatbridgeConfig, *, environ: Mapping[str, str]) -> int:
    """Returns the process exit code; 0 after a clean signal-driven shutdown."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with engine_from_config(config, environ=environ) as (engine, choice):
        server = _health_app(engine)
        platforms = build_platforms(config, engine, server)
        if not platforms:
            _say(
                "no platform is enabled; set platforms.telegram.enabled: true "
                "(or talk to the bot with `chatbridge chat`)"
            )
            return 2
        runner = web.AppRunner(server, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, config.server.host, config.server.port)
        started: list[Platform] = []
        try:
            try:
                await site.start()
            except OSError as exc:
                _say(f"cannot listen on {config.server.host}:{config.server.port} ({exc.strerror})")
                return 1
            for platform in platforms:
                try:
                    await platform.start()
                except Exception as exc:  # an SDK's start can fail in many ways
                    _say(f"{platform.name} could not start: {exc}")
                    return 1
                started.append(platform)
            log.info(
                "serving %s with provider %s on %s:%s",
                ", ".join(p.name for p in started),
                choice.description,
                config.server.host,
                config.server.port,
            )
            await stop.wait()
            log.info("shutting down: finishing replies in flight")
        finally:
            # Platforms wait for their handlers; drain bounds that wait by
            # cancelling replies still running after the grace period.
            await asyncio.gather(
                engine.drain(config.engine.shutdown_grace),
                *(_close_quietly(platform) for platform in reversed(started)),
            )
            await runner.cleanup()
    return 0
