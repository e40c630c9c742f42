"""The `chatbridge.yaml` that a scenario test hands to `chatbridge run`.

Most scenario tests need the same shape: a provider at a fake, Telegram at a
fake, one allowed user, a free port. `run_config` builds it as data and
`write_run_config` writes it as YAML (PyYAML quotes what needs quoting), so a
test states only what its story changes: `engine={"shutdown_grace": "10s"}`,
`platforms={"telegram": {"mode": "webhook", ...}}` (merged key by key into
the defaults). `webhook_secret=` puts Telegram in webhook mode on this
server's own webhook URL, as the replica and kill-series runs need.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.support.people import ALICE

__all__ = ["run_config", "run_config_text", "telegram_webhook_url", "write_run_config"]


def run_config(
    *,
    port: int,
    telegram: str | None = None,
    openai: str | None = None,
    debug: bool = False,
    webhook_secret: str | None = None,
    allow: Iterable[int | str] = (ALICE,),
    **sections: Any,
) -> dict[str, Any]:
    """The config as a mapping.

    `telegram` and `openai` are the fakes' base URLs (`telegram` enables the
    platform; `openai` configures the provider `main`, model gpt-test, key
    sk-test); `debug` makes `main` the debug provider instead;
    `webhook_secret` switches Telegram to webhook mode at
    `telegram_webhook_url(port)` with that secret. `allow` takes
    Telegram user IDs or full `platform:id` strings. Any other keyword is a
    top-level section, merged into what these made (a value that is no
    mapping is taken as it is).
    """
    config: dict[str, Any] = {}
    if openai is not None:
        config["providers"] = {
            "main": {
                "type": "openai",
                "model": "gpt-test",
                "api_key": "sk-test",
                "base_url": openai,
            }
        }
    elif debug:
        config["providers"] = {"main": {"type": "debug"}}
    if telegram is not None:
        config["platforms"] = {"telegram": {"enabled": True, "base_url": telegram}}
        if webhook_secret is not None:
            config["platforms"]["telegram"] |= {
                "mode": "webhook",
                "webhook_url": telegram_webhook_url(port),
                "webhook_secret": webhook_secret,
            }
    allowed = [str(a) if ":" in str(a) else f"telegram:{a}" for a in allow]
    if allowed:
        config["access"] = {"allow": allowed}
    config["server"] = {"port": port}
    for name, section in sections.items():
        config[name] = (
            _merged(config.get(name, {}), section) if isinstance(section, Mapping) else section
        )
    return config


def telegram_webhook_url(port: int) -> str:
    """Where `chatbridge run` on `port` takes Telegram's webhook POSTs."""
    return f"http://127.0.0.1:{port}/telegram/webhook"


def run_config_text(**options: Any) -> str:
    """`run_config(**options)` as YAML, for a test that rewrites its config to reload it."""
    return yaml.safe_dump(run_config(**options), sort_keys=False)


def write_run_config(directory: Path, **options: Any) -> Path:
    """`run_config(**options)` written to `directory/chatbridge.yaml`; returns that path."""
    path = directory / "chatbridge.yaml"
    path.write_text(run_config_text(**options), encoding="utf-8")
    return path


def _merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = _merged(old, value)
        else:
            merged[key] = value
    return merged
