"""`Duration`: units, plain numbers and the message for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from chatbridge.config import Duration
from tests.config._helpers import load_error, load_ok, render

ADAPTER: TypeAdapter[float] = TypeAdapter(Duration)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("90s", 90.0),
        ("30m", 1800.0),
        ("24h", 86400.0),
        ("2d", 172800.0),
        ("1.5h", 5400.0),
        ("1h30m", 5400.0),
        (" 45s ", 45.0),
        ("0s", 0.0),
        ("120", 120.0),
        ("2.5", 2.5),
        (90, 90.0),
        (0.25, 0.25),
        (0, 0.0),
    ],
)
def test_parses(raw: object, seconds: float) -> None:
    value = ADAPTER.validate_python(raw)
    assert value == seconds
    assert isinstance(value, float)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("soon", "expected a duration like 90s, 30m or 24h, not 'soon'"),
        ("10x", "expected a duration like 90s, 30m or 24h, not '10x'"),
        ("h", "expected a duration like 90s, 30m or 24h, not 'h'"),
        ("", "expected a duration like 90s, 30m or 24h, not ''"),
        ("5 m", "expected a duration like 90s, 30m or 24h, not '5 m'"),
        ("-5s", "expected a duration like 90s, 30m or 24h; a duration cannot be negative"),
        (-1, "expected a duration like 90s, 30m or 24h; a duration cannot be negative"),
        ("nan", "expected a duration like 90s, 30m or 24h"),
        (True, "expected a duration like 90s, 30m or 24h, not a boolean"),
        ([1], "expected a duration like 90s, 30m or 24h"),
    ],
)
def test_rejects(raw: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        ADAPTER.validate_python(raw)
    (error,) = info.value.errors()
    assert error["msg"] == f"Value error, {message}"


def test_all_duration_fields_accept_units(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        engine: {session_ttl: 2h, shutdown_grace: 3}
        memory: {max_age: 7d}
        platforms: {telegram: {edit_interval: 0.5}}
        providers: {p: {type: debug, timeout: 2m}}
        """,
    )
    assert (cfg.engine.session_ttl, cfg.engine.shutdown_grace) == (7200.0, 3.0)
    assert cfg.memory.max_age == 604800.0
    assert cfg.platforms.telegram.edit_interval == 0.5
    assert cfg.providers.entries["p"].timeout == 120.0


def test_bad_durations_in_file(tmp_path: Path) -> None:
    err = load_error(
        tmp_path,
        """
        engine:
          session_ttl: -5m
          shutdown_grace: forever
        providers: {p: {type: debug, timeout: 0}}
        """,
    )
    assert render(err) == [
        "FILE:3: engine.session_ttl: expected a duration like 90s, 30m or 24h; "
        "a duration cannot be negative",
        "FILE:4: engine.shutdown_grace: expected a duration like 90s, 30m or 24h, not 'forever'",
        "FILE:5: providers.p.timeout: Input should be greater than 0 (got 0.0)",
    ]
