"""`chatbridge` command line: run, chat, config check|explain, memory show|forget|export, usage.

Exit codes: 0 ok, 1 the store or a platform failed, 2 bad config or usage
(a `--user` that is neither `platform:id` nor an identity name, a store
directory that cannot be written, `run` without a platform or a provider).
Every failure is one sentence on stderr, never a traceback. `chat` ends
quietly (exit 0) when its reader leaves (`chatbridge chat | head -1`).

The `memory` commands read only the sections they need (`MEMORY_SECTIONS`), so
they work where the platform and provider secrets are not set; they never
create a store, and what they print about stored text has every control,
format and surrogate character escaped (a user's ESC sequence reaches the
admin's terminal as the visible text `\\u001b`, and the JSON stays valid).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import chatbridge
from chatbridge.config import (
    ChatbridgeConfig,
    ConfigError,
    check_user_id,
    describe_store,
    load_config,
    parse_duration,
    resolve_config_path,
    summarize,
)
from chatbridge.core.app.bounded_run import run_bounded
from chatbridge.core.app.logs import SecretRedactor, setup_logging
from chatbridge.core.app.preflight import missing_sdk, unwritable_store
from chatbridge.core.app.usage import USAGE_SECTIONS, render, usage_lines
from chatbridge.core.app.wiring import (
    access_from_config,
    engine_from_config,
    policy_from_config,
    secrets_of,
    store_from_config,
)
from chatbridge.core.engine import Engine
from chatbridge.core.links import People
from chatbridge.core.ports.store import Store, StoreError
from chatbridge.platforms.console import ConsolePlatform

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
LOG_LEVELS = ("debug", "info", "warning", "error")
MEMORY_SECTIONS = ("memory", "identities", "access")
"""What `memory show|export|forget` validate: the store and who is who, no secrets."""
MAX_SINCE = 400 * 86400.0  # the ledger keeps day counters this long (Redis expires them)
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatbridge",
        description="A chat assistant that remembers what you said an hour ago.",
    )
    version = f"chatbridge {chatbridge.__version__}"
    parser.add_argument("--version", action="version", version=version)
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
    explain = with_config(
        config_commands.add_parser("explain", help="the settings in force in one place")
    )
    explain.add_argument(
        "--chat",
        required=True,
        metavar="PLACE",
        help="discord:CHANNEL_ID, telegram:CHAT_ID, slack:CHANNEL_ID; a thread as PLACE/thread:ID",
    )

    memory = commands.add_parser("memory", help="inspect or erase a user's memory")
    memory_commands = memory.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("show", "print the user's ring as JSON"),
        ("forget", "erase the user's ring and sessions"),
        ("export", "the user's ring as JSON, for data-access requests"),
    ):
        sub = with_config(memory_commands.add_parser(action, help=text))
        sub.add_argument("--user", required=True, help="platform:id or identity name")
    usage = with_config(
        commands.add_parser("usage", help="tokens, requests, cost and what is left, per person")
    )
    usage.add_argument("--since", default="7d", help="how far back, e.g. 24h, 7d, 90d (7d)")
    usage.add_argument("--user", help="only this person (platform:id or identity name)")
    usage.add_argument("--format", choices=("table", "json", "csv"), default="table")
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
    only = {"memory": MEMORY_SECTIONS, "usage": USAGE_SECTIONS}.get(args.command)
    return load_config(path, environ, only=only), str(path) if path else "built-in defaults"


def _escape(char: str, *, json_style: bool) -> str:
    """One unsafe character as visible ASCII: `\\u001b` in JSON, `\\x1b` in text."""
    code = ord(char)
    if code > 0xFFFF and json_style:  # JSON spells these as a surrogate pair
        high, low = divmod(code - 0x10000, 0x400)
        return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    if json_style or code > 0xFF:
        return f"\\u{code:04x}"
    return f"\\x{code:02x}"


def visible(text: str, *, json_style: bool = False) -> str:
    """`text` with control, format (bidi, zero-width), separator and lone
    surrogate characters escaped, so stored text cannot drive a terminal.

    With `json_style`, escapes are JSON's: applied to `json.dumps` output
    they only touch string contents and the result decodes to the same data.
    """
    if text.isprintable() and text.isascii():
        return text
    return "".join(
        _escape(ch, json_style=json_style)
        if ch not in "\n" and unicodedata.category(ch) in _UNSAFE
        else ch
        for ch in text
    )


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
        console = ConsolePlatform(engine, user=args.user, stdin=sys.stdin, stdout=sys.stdout)
        await console.run()
        await engine.drain(config.engine.shutdown_grace)
    if console.reader_gone:
        # `chatbridge chat | head -1`: the reader left, which ends the chat
        # like Ctrl-D; nothing more can be printed, not even at exit.
        _silence_stdout()
    return EXIT_OK


def _bad_user(user: str, config: ChatbridgeConfig, *, console: bool) -> str | None:
    """`--user` must be a `platform:id` or a name under `identities`; anything
    else would act on a ring nobody can ever write to."""
    if console and user == "local":
        return None
    if ":" in user:
        try:
            check_user_id(user)
        except ValueError as exc:
            return f"--user {user}: {exc}"
        return None
    if user in config.identities:
        return None
    names = ", ".join(sorted(config.identities)) or "none configured"
    return (
        f"--user {user}: neither a platform:id (like telegram:579304651) "
        f"nor a name under identities ({names})"
    )


def _missing_store(config: ChatbridgeConfig) -> Path | None:
    """The store file when it does not exist: opening it would create an empty
    one and hide that the path is wrong (Redis has no such file)."""
    memory = config.memory
    path = Path(memory.path)
    return path.absolute() if memory.backend in ("sqlite", "json") and not path.exists() else None


async def _memory(args: argparse.Namespace, config: ChatbridgeConfig) -> int:
    access = access_from_config(config)
    store = await store_from_config(config)
    try:
        # Any ID of a linked person acts on the person (every linked ID's ring).
        people = People(access, store)
        person = await people.of_id(args.user)
        if args.action == "forget":
            keys = {k for member in person.ring_keys for k in access.ring_keys(member)}
            print(visible(await _forget(store, args.user, sorted(keys | {args.user}))))
        else:
            entries = await people.ring(person, since=0.0)
            text = json.dumps([asdict(e) for e in entries], indent=2, ensure_ascii=False)
            print(visible(text, json_style=True))
    finally:
        await store.aclose()
    return EXIT_OK


async def _usage(args: argparse.Namespace, config: ChatbridgeConfig) -> int:
    access = access_from_config(config)
    store = await store_from_config(config)
    try:
        # Any ID of a linked person names the person (its account is the person's key).
        person = None if args.user is None else (await People(access, store).of_id(args.user)).key
        lines = await usage_lines(
            store,
            config=config,
            policy=policy_from_config(config),
            access=access,
            since=time.time() - args.since_seconds,
            person=person,
        )
    finally:
        await store.aclose()
    print(visible(render(lines, args.format), json_style=args.format == "json"))
    return EXIT_OK


async def _forget(store: Store, user: str, keys: list[str]) -> str:
    """Erase every key of the person; the sentence says whether anything was there.

    `Store.forget` returns nothing, so the ring and today's usage are read
    first (sessions cannot be listed per user; they go with the ring).
    """
    now = datetime.now(UTC)
    days = {now.date().isoformat(), now.astimezone().date().isoformat()}
    entries, used = 0, False
    for key in keys:
        entries += len(await store.ring(key, since=0.0))
        for day in days:
            usage = await store.usage(key, day=day)
            used = used or bool(usage.input_tokens or usage.output_tokens)
        await store.forget(key)
    where = f"{user} ({', '.join(keys)})"
    if entries:
        plural = "entry" if entries == 1 else "entries"
        return f"erased {entries} memory {plural} of {where}, with their sessions and usage"
    if used:
        return f"erased the sessions and usage of {where}; no memory entries were stored"
    return f"nothing stored for {where}; nothing erased"


async def _run(
    args: argparse.Namespace,
    config: ChatbridgeConfig,
    environ: Mapping[str, str],
    redactor: SecretRedactor,
) -> int:
    from chatbridge.core.app.serve import serve

    def say(sentence: str) -> None:
        _fail(sentence, EXIT_FAILED, redactor)

    def reload() -> ChatbridgeConfig:
        """SIGHUP: the same file `run` started from, read again."""
        return _load(args, environ)[0]

    return await serve(config, environ=environ, say=say, reload=reload, on_secrets=redactor.add)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    try:
        config, source = _load(args, environ)
    except ConfigError as exc:
        # Keys and file names come from the file: escape what could drive a terminal.
        print(visible(str(exc)), file=sys.stderr)
        return EXIT_CONFIG
    redactor = setup_logging(
        level=_log_level(args, config, environ),
        secrets=secrets_of(config, environ),
        json_format=config.logging.format == "json",
    )
    if args.command == "config" and args.action == "explain":
        return _explain(args.chat, config, environ, redactor)
    if args.command == "config":
        for warning in config.warnings:
            print(visible(str(warning)), file=sys.stderr)
        print(visible(f"{source}: {summarize(config)}"))
        return EXIT_OK
    user = getattr(args, "user", None)
    if user is not None and (bad := _bad_user(user, config, console=args.command == "chat")):
        return _fail(visible(bad), EXIT_CONFIG, redactor)
    if args.command in ("chat", "memory", "usage") and (
        sdk := missing_sdk(config, platforms=False)
    ):
        return _fail(visible(sdk), EXIT_CONFIG, redactor)
    try:
        if args.command == "chat":
            if unwritable := unwritable_store(config.memory):
                return _fail(visible(unwritable), EXIT_CONFIG, redactor)
            return asyncio.run(_chat(args, config, environ))
        if args.command in ("memory", "usage"):
            missing = _missing_store(config)
            if missing is not None:
                return _fail(visible(f"no store at {missing}"), EXIT_FAILED, redactor)
            if args.command == "usage":
                try:
                    args.since_seconds = parse_duration(args.since, limit=MAX_SINCE)
                except ValueError as exc:
                    return _fail(visible(f"--since {args.since}: {exc}"), EXIT_CONFIG, redactor)
                return asyncio.run(_usage(args, config))
            return asyncio.run(_memory(args, config))
        return run_bounded(_run(args, config, environ, redactor))  # its end is bounded too
    except StoreError as exc:
        return _fail(str(exc), EXIT_FAILED, redactor)
    except ConfigError as exc:  # found only while wiring (an API key file from the environment)
        print(redactor.redact(str(exc)), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_OK
    except BrokenPipeError:
        # `chatbridge memory show ... | head`: the reader left; no traceback.
        _silence_stdout()
        return EXIT_FAILED


def _explain(
    chat: str, config: ChatbridgeConfig, environ: Mapping[str, str], redactor: SecretRedactor
) -> int:
    from chatbridge.core.app.explain import BadPlace, explain, parse_place

    try:
        place = parse_place(chat)
    except BadPlace as exc:
        return _fail(visible(f"--chat {exc}"), EXIT_CONFIG, redactor)
    print(redactor.redact(visible(asyncio.run(explain(config, place, environ)))))
    return EXIT_OK


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # not a real file (tests capture stdout): nothing to flush


if __name__ == "__main__":
    sys.exit(main())
