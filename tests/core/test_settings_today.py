"""`EngineSettings.today`: the usage day in the bot's timezone, at any moment
of a second (it is looked up per whole second)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from chatbridge.core.settings import EngineSettings

BERLIN = ZoneInfo("Europe/Berlin")
MIDNIGHT_BERLIN = datetime(2026, 12, 3, tzinfo=BERLIN).timestamp()


def test_the_day_changes_at_midnight_in_the_bots_timezone_not_a_moment_early() -> None:
    for tz in (BERLIN, None):
        settings = EngineSettings(timezone=tz)
        for offset in (-3600.0, -1.0, -0.6, -0.4, -0.001, 0.0, 0.4, 0.999, 1.0, 7200.5):
            now = MIDNIGHT_BERLIN + offset
            expected = datetime.fromtimestamp(now, tz).date().isoformat()
            assert settings.today(now) == expected, (tz, offset)
    assert EngineSettings(timezone=BERLIN).today(MIDNIGHT_BERLIN - 0.4) == "2026-12-02"
    assert EngineSettings(timezone=BERLIN).today(MIDNIGHT_BERLIN) == "2026-12-03"
