"""`chatbridge run`: serve every enabled platform until SIGINT/SIGTERM.

Start: store and providers, the HTTP server (webhooks, `/healthz`, `/readyz`,
`/metrics`), each platform, then whatever the inbox still holds from before a
restart. Shutdown (one clock, `engine.shutdown_grace`): platforms stop
receiving, the engine lets answers in flight finish and cuts the rest (they
stay in the inbox), then platforms, server, providers and store close, in
reverse order of opening (`AsyncExitStack`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from chatbridge.config import ChatbridgeConfig
from chatbridge.core.app.listen import bind, serve_on
from chatbridge.core.app.preflight import NO_PLATFORM, refuse_to_serve
from chatbridge.core.app.registry import build_platforms
from chatbridge.core.app.reload import Reloader
from chatbridge.core.app.webhooks import mount
from chatbridge.core.app.wiring import engine_from_config
from chatbridge.core.engine import Engine
from chatbridge.core.metrics import CONTENT_TYPE_LATEST
from chatbridge.core.models import Conversation, InboxEntry, IncomingMessage
from chatbridge.core.ports import Platform, PlatformContext, PlatformError, Route
from chatbridge.core.ports.store import StoreError
from chatbridge.providers.factory import warm

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["serve"]

log = logging.getLogger(__name__)

Say = Callable[[str], None]


class _Readiness:
    """What `/readyz` reports: every platform connected, the store taking
    writes, not draining.

    The store check is the intake's own write: a probe entry added to the
    inbox and marked done at once (platform `chatbridge`, which no adapter
    serves), so "ready" means an incoming message would be taken now. A full
    disk or a Redis that refuses writes makes it 503 until a write succeeds
    again. One probe per `probe_every` seconds at most; calls in between get
    its result (`/readyz` is unauthenticated and may be polled hard).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        probe_every: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.platforms: list[Platform] = []
        self.draining = False
        self._probe_every, self._monotonic = probe_every, monotonic
        self._probed: tuple[float, str] | None = None  # (when, problem or "")

    async def ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, "draining"
        waiting = [p.name for p in self.platforms if not p.connected]
        if not self.platforms or waiting:
            return False, "not connected: " + (", ".join(waiting) or "starting")
        problem = await self._store_problem()
        return (False, problem) if problem else (True, "ok")

    async def _store_problem(self) -> str:
        now = self._monotonic()
        if self._probed is not None and now - self._probed[0] < self._probe_every:
            return self._probed[1]
        problem = ""
        store = self.engine.store
        try:
            await store.usage("readiness-probe", day="1970-01-01")
        except StoreError:
            problem = "store not answering"
        else:
            key = f"chatbridge:readiness-{uuid.uuid4().hex}"
            probe = IncomingMessage(Conversation("chatbridge", "readiness", "probe"), "")
            try:
                await store.inbox_add(InboxEntry(key, probe, received_at=time.time()))
                await store.inbox_done(key)
            except StoreError as exc:
                log.warning("readiness: the store refuses writes (%s)", exc)
                problem = "store refuses writes"
        self._probed = (self._monotonic(), problem)
        return problem


def _http_app(engine: Engine, readiness: _Readiness, routes: Sequence[Route]) -> web.Application:
    """`/healthz`, `/readyz`, `/metrics` and the platforms' webhook `routes`."""
    from aiohttp import web  # imported when the server is built: after a first poll

    app = web.Application()
    mount(app, routes)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        ready, reason = await readiness.ready()
        return web.json_response({"status": reason}, status=200 if ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=engine.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


class BackgroundReloads:
    """Runs one reload at a time off the signal handler; a SIGHUP during a
    reload queues exactly one more."""

    def __init__(self, reloader: Reloader) -> None:
        self._reloader = reloader
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def request(self) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await self._reloader.reload()
            except Exception as exc:  # a reload must never take the bot down
                log.error("reload failed, the running config stays: %s", exc)
            if not self._again:
                return


def _bound(runner: web.AppRunner, host: str, port: int) -> str:
    """`host:port` as bound: with `server.port: 0` the port the OS picked."""
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return f"{host}:{address[1]}"
    return f"{host}:{port}"


async def _warm_quietly(engine: Engine) -> None:
    try:
        await warm(engine.provider)
    except Exception as exc:  # the first answer will import it (and say what failed)
        log.warning("preloading the provider SDK failed: %s", exc)


async def _close_quietly(platform: Platform) -> None:
    try:
        await platform.aclose()
    except Exception as exc:  # shutting down anyway; say what failed
        log.warning("%s did not close cleanly: %s", platform.name, exc)


async def serve(
    config: ChatbridgeConfig,
    *,
    environ: Mapping[str, str],
    say: Say,
    reload: Callable[[], ChatbridgeConfig] | None = None,
    on_secrets: Callable[[Iterable[str]], None] | None = None,
) -> int:
    """Returns the process exit code; 0 after a clean signal-driven shutdown.

    `say` prints a start-up failure as one sentence (masked) on stderr.
    `reload` re-reads the config file (SIGHUP); `on_secrets` learns the
    secrets of a reloaded config so logs keep masking them.
    """
    # Refusals that need nothing opened come first: no store file, no data/.
    refusal = refuse_to_serve(config, environ)
    if refusal:
        say(refusal)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        engine, choice = await stack.enter_async_context(
            engine_from_config(config, environ=environ)
        )
        for warning in config.warnings:
            log.warning("%s", warning)
        if reload is not None:
            reloader = Reloader(
                engine=engine,
                current=config,
                load=reload,
                environ=environ,
                stack=stack,
                on_secrets=on_secrets,
            )
            reloads = BackgroundReloads(reloader)
            loop.add_signal_handler(signal.SIGHUP, reloads.request)
            stack.callback(loop.remove_signal_handler, signal.SIGHUP)
        readiness = _Readiness(engine)
        context = PlatformContext(
            handler=engine,
            commands=engine.commands,
            cursors=engine.store,
            metrics=engine.metrics,
            say=lambda key: engine.settings.say(key),  # read per call: a reload may change it
            mention_rule=engine.requires_mention,  # likewise
            clock=engine.clock.now,
        )
        platforms = build_platforms(config, context)
        if not platforms:
            say(NO_PLATFORM)
            return 2
        routes = [route for platform in platforms for route in platform.routes]
        # The address is taken now (a port in use fails before anything is
        # received); the app and aiohttp wait until the platforms receive,
        # unless a platform declared webhook routes and so needs it running first.
        try:
            sockets = bind(config.server.host, config.server.port)
        except OSError as exc:
            say(f"cannot listen on {config.server.host}:{config.server.port} ({exc.strerror})")
            return 1
        for sock in sockets:
            stack.callback(sock.close)
        app = _http_app(engine, readiness, routes) if routes else None
        runner = await serve_on(app, sockets, stack) if app is not None else None
        for platform in platforms:
            engine.attach(platform.name, platform.outbox)
            stack.push_async_callback(_close_quietly, platform)
            try:
                await platform.start()
            except PlatformError as exc:
                say(str(exc))
                return 1
            except Exception as exc:  # an SDK's start can fail in many ways
                say(f"{platform.name} could not start ({type(exc).__name__}: {exc})")
                return 1
            readiness.platforms.append(platform)
        if runner is None:
            runner = await serve_on(_http_app(engine, readiness, ()), sockets, stack)
        # SDK imports were deferred so the first poll came early; do them now.
        warming = asyncio.create_task(_warm_quietly(engine))
        stack.callback(warming.cancel)
        left = await engine.resume()
        log.info(
            "serving %s with provider %s on %s%s",
            ", ".join(p.name for p in platforms),
            choice.description,
            _bound(runner, config.server.host, config.server.port),
            f"; answering {left} messages left from before the restart" if left else "",
        )
        await stop.wait()
        log.info("shutting down: finishing replies in flight")
        readiness.draining = True
        for platform in platforms:
            await platform.stop_receiving()
        await engine.drain(config.engine.shutdown_grace)
    return 0
