"""The `chatbridge.yaml` that a scenario test hands to `chatbridge run`.

Most scenario tests need the same shape: a provider at a fake, Telegram at a
fake, one allowed user, a free port. `run_config` builds it as data and
`write_run_config` writes it as YAML (PyYAML quotes what needs quoting), so a
test states only what its story changes: `engine={"shutdown_grace": "10s"}`,
`platforms={"telegram": {"mode": "webhook", ...}}` (merged key by key into
the defaults).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.support.people import ALICE

__all__ = ["run_config", "write_run_config"]


def run_config(
    *,
    port: int,
    telegram: str | None = None,
    openai: str | None = None,
    debug: bool = False,
    allow: Iterable[int | str] = (ALICE,),
    **sections: Mapping[str, Any],
) -> dict[str, Any]:
    """The config as a mapping.

    `telegram` and `openai` are the fakes' base URLs (`telegram` enables the
    platform; `openai` configures the provider `main`, model gpt-test, key
    sk-test); `debug` makes `main` the debug provider instead. `allow` takes
    Telegram user IDs or full `platform:id` strings. Any other keyword is a
    top-level section, merged into what these made.
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
    allowed = [str(a) if ":" in str(a) else f"telegram:{a}" for a in allow]
    if allowed:
        config["access"] = {"allow": allowed}
    config["server"] = {"port": port}
    for name, section in sections.items():
        config[name] = _merged(config.get(name, {}), section)
    return config


def write_run_config(directory: Path, **options: Any) -> Path:
    """`run_config(**options)` written to `directory/chatbridge.yaml`; returns that path."""
    path = directory / "chatbridge.yaml"
    path.write_text(yaml.safe_dump(run_config(**options), sort_keys=False), encoding="utf-8")
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
