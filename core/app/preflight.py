"""What `run` and `chat` refuse before they open anything.

Each check returns one sentence naming the setting to change, or None. They
run before the store is opened, so a refused start leaves no `data/`
directory and no store file behind, and the CLI exits 2 (a configuration to
fix: systemd's `RestartPreventExitStatus=2` then stops instead of restarting
every few seconds).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from chatbridge.config import ChatbridgeConfig, MemoryConfig
from chatbridge.core.app.wiring import AUTO_KEYS, auto_key

__all__ = [
    "NO_PLATFORM",
    "missing_sdk",
    "no_real_provider",
    "refuse_to_serve",
    "unwritable_store",
]

NO_PLATFORM = (
    "no platform is enabled; set platforms.telegram.enabled: true "
    "(or talk to the bot with `chatbridge chat`)"
)
_SYSTEMD_PATH = "/var/lib/chatbridge/chatbridge.db"

# The optional parts (pyproject's extras): the modules each imports, with the
# distribution that provides them, and the extra that installs them.
_EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "telegram": (
        ("telegram", "python-telegram-bot"),
        ("telegramify_markdown", "telegramify-markdown"),
    ),
    "discord": (("discord", "discord.py"), ("yarl", "yarl")),
    "slack": (
        ("slack_bolt", "slack-bolt"),
        ("slack_sdk", "slack-sdk"),
        ("markdown_to_mrkdwn", "markdown-to-mrkdwn"),
    ),
    "redis": (("redis", "redis"),),
}


def refuse_to_serve(config: ChatbridgeConfig, environ: Mapping[str, str]) -> str | None:
    """`run`: a platform, the SDKs it needs, a real provider and a writable
    store, in that order."""
    if not config.platforms.enabled:
        return NO_PLATFORM
    return (
        missing_sdk(config, platforms=True)
        or no_real_provider(config, environ)
        or unwritable_store(config.memory)
    )


def missing_sdk(config: ChatbridgeConfig, *, platforms: bool) -> str | None:
    """An enabled platform (with `platforms`) or the Redis store whose SDK is
    not installed: `pip install chatbridge` leaves them to extras, so a
    Telegram-only bot carries no discord.py. Asked without importing them."""
    enabled = config.platforms.enabled if platforms else ()
    needed = [(f"{name} is enabled", name) for name in enabled]
    if config.memory.backend == "redis":
        needed.append(("memory.backend is redis", "redis"))
    for what, extra in needed:
        for module, distribution in _EXTRAS[extra]:
            if importlib.util.find_spec(module) is None:
                return (
                    f"{what} but {distribution} is not installed: pip install 'chatbridge[{extra}]'"
                )
    return None


def no_real_provider(config: ChatbridgeConfig, environ: Mapping[str, str]) -> str | None:
    """The `debug` provider echoes the system prompt and the user's history:
    fine in the admin's own terminal (`chat` falls back to it), but it
    answers a platform's users only when the config names it (`type: debug`).

    A bad `$OPENAI_API_KEY_FILE` raises `ConfigError`, as when wiring.
    """
    if config.providers.entries or any(auto_key(environ, var) for _, var in AUTO_KEYS):
        return None
    variables = " or ".join(var for _, var in AUTO_KEYS)
    return (
        f"no model provider for `run`: set {variables}, or configure one under providers "
        "(an entry with `type: debug` answers with the prompt itself, on purpose)"
    )


def unwritable_store(memory: MemoryConfig) -> str | None:
    """The SQLite or JSON file cannot be made or written where `memory.path` puts it.

    SQLite needs the directory too (its `-wal` and `-shm` files), so the check
    is on the nearest directory that exists: the file's own, or the one its
    missing directories would be made in. `os.access` asks the kernel, so a
    read-only mount (systemd's `ProtectSystem=strict`) counts like a mode.
    """
    if memory.backend not in ("sqlite", "json"):
        return None
    path = Path(memory.path).absolute()
    directory = path.parent
    while not directory.is_dir() and directory != directory.parent:
        directory = directory.parent
    blocked = [p for p in (directory, path) if p.exists() and not _writable(p)]
    if not blocked:
        return None
    where = blocked[0]
    return (
        f"the store {path} cannot be written: {where} is {_why(where)}; set memory.path "
        f"to a file in a writable directory (under the systemd unit: {_SYSTEMD_PATH})"
    )


def _writable(path: Path) -> bool:
    mode = os.W_OK | (os.X_OK if path.is_dir() else 0)
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)  # pragma: no cover - every Linux has effective_ids


def _why(path: Path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "on a read-only file system"
    except OSError:
        pass
    return f"not writable for user {os.geteuid()}"
