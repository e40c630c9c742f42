"""`chatbridge` command line: run, chat, config check, memory show|forget|export.

Exit codes: 0 ok, 1 the store or a platform failed, 2 bad config or usage.
Every failure is one sentence on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from chatbridge.config import (
    ChatbridgeConfig,
    ConfigError,
    describe_store,
    load_config,
    resolve_config_path,
    summarize,
)
from chatbridge.core.app.logs import SecretRedactor, setup_logging
from chatbridge.core.app.wiring import (
    access_from_config,
    engine_from_config,
    secrets_of,
    store_from_config,
)
from chatbridge.core.engine import Engine
from chatbridge.core.store import StoreError
from chatbridge.platforms.console import ConsolePlatform

import chatbridge

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
LOG_LEVELS = ("debug", "info", "warning", "error")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatbridge",
        description="A chat assistant that remembers what you said an hour ago.",
    )
    parser.add_argument("--version", action="version", version=f"chatbridge {chatbridge.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument("--config", metavar="FILE", help="config file (default: see README)")
        return sub

    run = with_config(commands.add_parser("run", help="serve every enabled platform"))
    run.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        type=str.lower,
        help="debug, info, warning or error (default: $CHATBRIDGE_LOG_LEVEL, else logging.level)",
    )
    chat = with_config(commands.add_parser("chat", help="talk to the bot in this terminal"))
    chat.add_argument("--user", default="local", help="act as this user (platform:id or name)")
    chat.add_argument("--quiet", action="store_true", help="no start-up banner")

    config = commands.add_parser("config", help="check the config file")
    config_commands = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    with_config(config_commands.add_parser("check", help="validate and summarise"))

    memory = commands.add_parser("memory", help="inspect or erase a user's memory")
    memory_commands = memory.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("show", "print the user's ring as JSON"),
        ("forget", "erase the user's ring and sessions"),
        ("export", "the user's ring as JSON, for data-access requests"),
    ):
        sub = with_config(memory_commands.add_parser(action, help=text))
        sub.add_argument("--user", required=True, help="platform:id or identity name")
    return parser


def _fail(message: str, code: int, redactor: SecretRedactor | None = None) -> int:
    """One sentence on stderr, with every configured secret masked."""
    if redactor is not None:
        message = redactor.redact(message)
    print(f"chatbridge: {message}", file=sys.stderr, flush=True)
    return code


def _log_level(
    args: argparse.Namespace, config: ChatbridgeConfig, environ: Mapping[str, str]
) -> int:
    if args.command != "run":
        return logging.WARNING
    chosen = getattr(args, "log_level", None) or environ.get("CHATBRIDGE_LOG_LEVEL", "").lower()
    if chosen not in LOG_LEVELS:
        chosen = config.logging.level
    return int(getattr(logging, chosen.upper()))


def _load(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[ChatbridgeConfig, str]:
    path = resolve_config_path(args.config, environ, Path.cwd())
    return load_config(path, environ), str(path) if path else "built-in defaults"


def _banner(user: str, config: ChatbridgeConfig, engine: Engine, provider: str) -> str:
    store = describe_store(config.memory)
    who = engine.access.resolve(user) if user != "local" else "console:local"
    return f"chatbridge chat · provider: {provider} · store: {store} · user: {who} · Ctrl-D quits"


async def _chat(
    args: argparse.Namespace, config: ChatbridgeConfig, environ: Mapping[str, str]
) -> int:
    async with engine_from_config(config, environ=environ) as (engine, choice):
        if not args.quiet:
            print(_banner(args.user, config, engine, choice.description), flush=True)
        await ConsolePlatform(engine, user=args.user, stdin=sys.stdin, stdout=sys.stdout).run()
        await engine.drain(config.engine.shutdown_grace)
    return EXIT_OK


async def _memory(args: argparse.Namespace, config: ChatbridgeConfig) -> int:
    access = access_from_config(config)
    user = access.resolve(args.user)
    store = await store_from_config(config)
    try:
        if args.action == "forget":
            keys = sorted(access.ring_keys(args.user))
            for key in keys:
                await store.forget(key)
            print(f"forgot {', '.join(keys)}: ring, sessions and usage erased")
        else:
            entries = await store.ring(user, since=0.0)
            print(json.dumps([asdict(e) for e in entries], indent=2, ensure_ascii=False))
    finally:
        await store.aclose()
    return EXIT_OK


async def _run(
    config: ChatbridgeConfig, environ: Mapping[str, str], redactor: SecretRedactor
) -> int:
    from chatbridge.core.app.serve import serve

    def say(sentence: str) -> None:
        _fail(sentence, EXIT_FAILED, redactor)

    return await serve(config, environ=environ, say=say)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    try:
        config, source = _load(args, environ)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    redactor = setup_logging(
        level=_log_level(args, config, environ),
        secrets=secrets_of(config, environ),
        json_format=config.logging.format == "json",
    )
    if args.command == "config":
        print(f"{source}: {summarize(config)}")
        return EXIT_OK
    try:
        if args.command == "chat":
            return asyncio.run(_chat(args, config, environ))
        if args.command == "memory":
            return asyncio.run(_memory(args, config))
        return asyncio.run(_run(config, environ, redactor))
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED, redactor)
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
