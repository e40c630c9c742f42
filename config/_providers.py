"""LLM provider entries and the `providers` section that names and orders them."""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ._base import OptionalSecret, OptionalStr, Section
from ._duration import Duration
from ._errors import Loc, raise_if
from ._limits import Prices

__all__ = ["RESERVED_PROVIDER_KEYS", "ProviderConfig", "ProvidersConfig", "did_you_mean"]

RESERVED_PROVIDER_KEYS = ("default", "fallback")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """`; did you mean 'x'?` or "" — appended to messages about unknown names."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class ProviderConfig(Section):
    """One LLM endpoint; the entry's key under `providers` is its name."""

    type: Literal["openai", "anthropic", "debug"]
    """Which SDK speaks to it; `debug` echoes locally and needs no network."""
    model: str = ""
    """Model ID sent to the API; required except for `debug` (defaults to "debug")."""
    api_key: OptionalSecret = None
    """API key; optional so local OpenAI-compatible servers work without one."""
    base_url: OptionalStr = None
    """Endpoint root; unset or "" means the SDK's default (which also honours its env vars)."""
    timeout: Duration = Field(default=60.0, gt=0, le=3600)
    """Per-request timeout (at most 1h), so a hung endpoint fails over instead of
    stalling a chat."""
    max_retries: int = Field(default=2, ge=0, le=100)
    """Retries the SDK makes itself before we move on to the fallback chain."""
    max_tokens: int = Field(default=1024, ge=1, le=1_000_000)
    """Upper bound on one reply's length; bounds cost and chat message size."""
    vision: bool = True
    """The model takes images; false: users hear one sentence and their text is answered."""
    prices: Prices | None = None
    """USD per million tokens (`input_per_mtok`, `output_per_mtok`); needed for
    `usd_per_day` / `usd_per_month` limits and for costs in `chatbridge usage`."""

    @model_validator(mode="before")
    @classmethod
    def _fill_type_defaults(cls, data: Any) -> Any:
        """A default that depends on `type` cannot be a plain field default."""
        if isinstance(data, dict) and data.get("type") == "debug" and not data.get("model"):
            return {**data, "model": "debug"}
        return data

    @model_validator(mode="after")
    def _check(self) -> ProviderConfig:
        issues: list[tuple[Loc, str]] = []
        if not self.model.strip():
            issues.append((("model",), f"required for type {self.type}"))
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            issues.append((("base_url",), f"expected an http(s):// URL, got {self.base_url!r}"))
        raise_if(issues)
        return self


class ProvidersConfig(Section):
    """Named provider entries plus which one answers first and who takes over on failure.

    Every key other than `default`/`fallback` is an entry, validated as a
    `ProviderConfig` through pydantic's typed extras; read them via `entries`.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, ProviderConfig] = Field(init=False)

    default: OptionalStr = None
    """Entry that answers first; filled in when there is exactly one entry."""
    fallback: tuple[str, ...] = ()
    """Entries tried in order when the previous one fails."""

    @property
    def entries(self) -> dict[str, ProviderConfig]:
        """All named provider entries in file order."""
        return dict(self.__pydantic_extra__ or {})

    @property
    def chain(self) -> tuple[str, ...]:
        """Names in the order they are tried; empty when no entries are configured."""
        return ((self.default,) if self.default else ()) + self.fallback

    @model_validator(mode="before")
    @classmethod
    def _default_to_sole_entry(cls, data: Any) -> Any:
        """With one entry there is nothing to choose, so consumers can rely on `default`."""
        if not isinstance(data, dict) or data.get("default"):
            return data
        names = [key for key in data if key not in RESERVED_PROVIDER_KEYS]
        return {**data, "default": names[0]} if len(names) == 1 else data

    @model_validator(mode="after")
    def _check_names(self) -> ProvidersConfig:
        names = list(self.entries)
        issues: list[tuple[Loc, str]] = [
            ((name,), "provider names use letters, digits, '_', '.', '-'")
            for name in names
            if not _NAME.fullmatch(name)
        ]
        if self.default is None and len(names) > 1:
            issues.append(
                (("default",), f"required with several providers: one of {', '.join(names)}")
            )
        if self.default is not None and self.default not in names:
            issues.append((("default",), _unknown(self.default, names)))
        seen: set[str] = set()
        for index, name in enumerate(self.fallback):
            if name not in names:
                issues.append((("fallback", index), _unknown(name, names)))
            elif name == self.default or name in seen:
                issues.append((("fallback", index), f"provider {name!r} is already in the chain"))
            seen.add(name)
        raise_if(issues)
        return self


def _unknown(name: str, names: list[str]) -> str:
    known = ", ".join(names) if names else "none are configured"
    return f"no provider named {name!r}{did_you_mean(name, names)} (known: {known})"
