"""How a config value may appear in an error message: never when it could be a secret.

A secret can land anywhere — pasted under the wrong key, aliased with a YAML
anchor into a field that quotes its input, substituted from `${VAR}` — so
messages echo a value only when it is short and does not look like a token
or key; otherwise they name its type and length.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["looks_like_secret", "shown"]

MAX_SHOWN = 40
# Well-known token shapes: OpenAI/Anthropic keys, Slack tokens, GitHub tokens,
# AWS and Google keys, JWTs, Telegram bot tokens.
_TOKEN = re.compile(
    r"(sk-|sk_|rk_|pk_|xox[abposr]-|xapp-|gh[pousr]_|AKIA|AIza|eyJ)|\d{5,}:[\w-]{20,}"
)


def looks_like_secret(text: str) -> bool:
    """True for a token-like string: a known prefix, or 20+ characters without
    spaces that mix letters and digits."""
    if _TOKEN.search(text):
        return True
    compact = len(text) >= 20 and not any(ch.isspace() for ch in text)
    return compact and any(ch.isdigit() for ch in text) and any(ch.isalpha() for ch in text)


def shown(value: Any) -> str:
    """`repr(value)` for an ordinary short value, else its type (and length)."""
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
        return text if len(text) <= MAX_SHOWN else f"a {len(text)}-digit number"
    if isinstance(value, str):
        if looks_like_secret(value) or len(value) > MAX_SHOWN:
            return f"a {len(value)}-character string (not shown)"
        return repr(value)
    return f"a {type(value).__name__}"
