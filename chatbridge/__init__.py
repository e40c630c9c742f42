"""chatbridge: a chat assistant for Telegram, Discord and Slack that remembers
what you said an hour ago.

The installed distribution has this one import package; the repository keeps
its parts in top-level folders that setuptools maps into it:
`chatbridge.core` (engine, memory, contracts, the composition root in
`chatbridge.core.app`), `chatbridge.platforms`, `chatbridge.providers`,
`chatbridge.stores` and `chatbridge.config`.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Looked up on demand: importlib.metadata costs ~50 ms at every start-up.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("chatbridge")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(name)
