"""Validated string types for `platform:id` user IDs and identity names.

Access rules and identities are the security boundary, so a malformed entry
(a Telegram username instead of its numeric ID, a typo'd platform) must fail
loudly at startup rather than silently never match anyone.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from ._shown import shown

__all__ = ["PLATFORMS", "AccessEntry", "IdentityName", "UserId", "check_user_id"]

PLATFORMS = ("telegram", "discord", "slack", "console")
_NUMERIC_PLATFORMS = ("telegram", "discord")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_SAMPLE = "like telegram:579304651 or slack:U0123"


def _require_str(value: Any, what: str) -> str:
    """YAML turns bare numbers into ints; say what was expected instead of 'not a string'."""
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {type(value).__name__} {shown(value)}")
    return value.strip()


def check_user_id(value: Any) -> str:
    """Validate `platform:id`; Telegram and Discord IDs are numbers, never usernames."""
    text = _require_str(value, f"a platform:id {_SAMPLE}")
    platform, sep, ident = text.partition(":")
    if not sep or not ident or any(ch.isspace() for ch in ident):
        raise ValueError(f"expected platform:id {_SAMPLE}, got {shown(text)}")
    if platform not in PLATFORMS:
        raise ValueError(
            f"unknown platform {shown(platform)} in {shown(text)}; use one of {_or(PLATFORMS)}"
        )
    if platform in _NUMERIC_PLATFORMS and not ident.lstrip("-").isdigit():
        raise ValueError(f"{platform} IDs are numbers, not names: got {shown(text)}")
    return text


def check_identity_name(value: Any) -> str:
    """Identity names are plain words so they can never be confused with `platform:id`."""
    text = _require_str(value, "an identity name")
    if not _NAME.fullmatch(text):
        raise ValueError(f"identity names use letters, digits, '_', '.', '-': got {shown(text)}")
    return text


def check_access_entry(value: Any) -> str:
    """An access entry is either a `platform:id` or the name of an identity."""
    text = _require_str(value, f"a platform:id {_SAMPLE} or an identity name")
    return check_user_id(text) if ":" in text else check_identity_name(text)


def _or(items: tuple[str, ...]) -> str:
    return ", ".join(items[:-1]) + " or " + items[-1]


UserId = Annotated[str, BeforeValidator(check_user_id)]
"""`platform:id`, e.g. `telegram:579304651`."""
IdentityName = Annotated[str, BeforeValidator(check_identity_name)]
"""Name of an entry under `identities`."""
AccessEntry = Annotated[str, BeforeValidator(check_access_entry)]
"""A `platform:id` or an identity name."""
