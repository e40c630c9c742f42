"""chatbridge: a chat assistant for Telegram, Discord and Slack that remembers
what you said an hour ago.

The installed distribution has this one import package; the repository keeps
its parts in top-level folders that setuptools maps into it:
`chatbridge.core` (engine, memory, store, contracts, the composition root in
`chatbridge.core.app`), `chatbridge.platforms`, `chatbridge.providers` and
`chatbridge.config`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("chatbridge")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
