"""`Duration`: human-friendly time spans that become float seconds.

Admins think in "30m" and "24h", code wants seconds; converting at the edge keeps
every consumer free of unit handling.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["Duration", "parse_duration"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_EXPECTED = "expected a duration like 90s, 30m or 24h"


def parse_duration(value: Any) -> float:
    """Turn `90s`, `30m`, `24h`, `2d`, `1h30m` or a number of seconds into seconds.

    Raises ValueError with the wording admins see; bools are refused because
    YAML turns `yes`/`no` into booleans, which are never meant as a duration.
    """
    if isinstance(value, bool):
        raise ValueError(f"{_EXPECTED}, not a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise ValueError(_EXPECTED)
    if not math.isfinite(seconds):
        raise ValueError(_EXPECTED)
    if seconds < 0:
        raise ValueError(f"{_EXPECTED}; a duration cannot be negative")
    return seconds


def _parse_text(text: str) -> float:
    """Parse the string forms; a bare number string counts as seconds."""
    negative = text.startswith("-")
    body = text[1:].strip() if negative else text
    try:
        seconds = float(body)
    except ValueError:
        if not body or _PART.sub("", body):
            raise ValueError(f"{_EXPECTED}, not {text!r}") from None
        seconds = sum(float(num) * _UNITS[unit] for num, unit in _PART.findall(body))
    return -seconds if negative else seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Seconds as a float; accepts `90s`, `30m`, `24h`, `2d`, compounds like `1h30m`, or a number."""
