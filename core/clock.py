"""Time as the engine sees it; tests pass a manual clock instead."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (wall time: entries and TTLs survive restarts)."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()
