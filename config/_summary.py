"""`summarize`: the one line `config check` prints, so admins see what will run."""

from __future__ import annotations

from ._models import ChatbridgeConfig, MemoryConfig
from ._urls import mask_url

__all__ = ["summarize"]


def summarize(config: ChatbridgeConfig) -> str:
    """E.g. `ok: providers main (openai gpt-5.4-mini) -> backup (anthropic …); platforms …`."""
    return "; ".join(
        [
            f"ok: providers {_providers(config)}",
            f"platforms {_platforms(config)}",
            f"memory {describe_store(config.memory)}",
        ]
    )


def _providers(config: ChatbridgeConfig) -> str:
    entries = config.providers.entries
    chain = config.providers.chain
    if not chain:
        return "none configured (built-in default)"
    return " -> ".join(f"{name} ({entries[name].type} {entries[name].model})" for name in chain)


def _platforms(config: ChatbridgeConfig) -> str:
    names = []
    for name in config.platforms.enabled:
        if name == "telegram" and config.platforms.telegram.mode == "webhook":
            name = "telegram (webhook)"
        elif name == "slack":
            name = "slack (socket mode)" if config.platforms.slack.socket_mode else "slack (http)"
        names.append(name)
    return ", ".join(names) if names else "none (console only)"


def describe_store(memory: MemoryConfig) -> str:
    """`sqlite data/chatbridge.db` or `redis redis://host:6379/0` (password hidden)."""
    if memory.backend == "redis":
        return f"redis {mask_url(memory.url)}"
    return f"{memory.backend} {memory.path}"
