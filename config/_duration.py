"""`Duration`: human-friendly time spans that become float seconds.

Admins think in "30m" and "24h", code wants seconds; converting at the edge keeps
every consumer free of unit handling.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

__all__ = ["MAX_DURATION", "Duration", "LongDuration", "parse_duration"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_EXPECTED = "expected a duration like 90s, 30m or 24h"

MAX_DURATION = 30 * 86400.0
"""The longest `Duration`: 30 days. Bounded so no timer or timestamp sum overflows."""
MAX_LONG_DURATION = 365 * 86400.0
"""The longest `LongDuration` (a year), for retention periods such as `memory.max_age`."""


def parse_duration(value: Any, *, limit: float = MAX_DURATION) -> float:
    """Turn `90s`, `30m`, `24h`, `2d`, `1h30m` or a number of seconds into seconds.

    Raises ValueError with the wording admins see; bools are refused because
    YAML turns `yes`/`no` into booleans, which are never meant as a duration.
    Values above `limit` (and ints too large for a float) are refused too.
    """
    if isinstance(value, bool):
        raise ValueError(f"{_EXPECTED}, not a boolean")
    too_long = f"a duration can be at most {_days(limit)}"
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            raise ValueError(too_long) from None
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise ValueError(_EXPECTED)
    if math.isnan(seconds):
        raise ValueError(_EXPECTED)
    if seconds < 0:
        raise ValueError(f"{_EXPECTED}; a duration cannot be negative")
    if seconds > limit:
        raise ValueError(too_long)
    return seconds


def _days(seconds: float) -> str:
    return f"{seconds / 86400:g}d"


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
"""Seconds as a float; accepts `90s`, `30m`, `24h`, `2d`, compounds like `1h30m`, or a number.
At most 30 days."""
LongDuration = Annotated[
    float, BeforeValidator(lambda value: parse_duration(value, limit=MAX_LONG_DURATION))
]
"""A `Duration` of up to 365 days, for how long something is kept."""
