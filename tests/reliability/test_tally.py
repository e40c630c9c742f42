"""The reliability table counts what happened, nothing more.

`tally_outcomes` is fed real pytest reports for items of the mapped files: a
pass of a fault test is a fault injected, an xfail never is; an assertion
failure is a wrong result, another exception an unhandled one; parts (such
as the inputs an SDK rejected) are shown under their row but never added to
the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from tests.reliability.plugin import tally_outcomes
from tests.support import tally


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> tally.Tally:
    table = tally.Tally()
    monkeypatch.setattr(tally, "TALLY", table)
    return table


@dataclass
class _Item:
    nodeid: str
    name: str


@dataclass
class _Excinfo:
    value: BaseException


STORE = "tests/reliability/test_store_faults.py"
SECRETS = "tests/reliability/test_config_secrets_never_echoed.py"


def _outcome(
    file: str,
    outcome: Literal["passed", "failed", "skipped"],
    exc: BaseException | None = None,
    **extra: Any,
) -> None:
    item = _Item(f"{file}::test_x", "test_x")
    report = pytest.TestReport(
        item.nodeid,
        (file, 1, "test_x"),
        {},
        outcome,
        None,
        "call",
        **extra,
    )
    tally_outcomes(item, report, None if exc is None else _Excinfo(exc))  # type: ignore[arg-type]


def test_a_passed_fault_test_is_one_fault_injected(fresh: tally.Tally) -> None:
    _outcome(STORE, "passed")
    assert fresh.sections["faults injected"] == {"store faults": 1}


def test_an_xfail_is_a_known_finding_not_a_fault_injected(fresh: tally.Tally) -> None:
    _outcome(STORE, "skipped", AssertionError("x"), wasxfail="reason")
    _outcome(STORE, "skipped", KeyError("x"), wasxfail="reason")
    assert fresh.sections["faults injected"] == {}
    assert fresh.sections["wrong results"] == {"store faults: test_x (known, xfail)": 1}
    assert fresh.sections["unhandled exceptions"] == {"store faults: KeyError (known, xfail)": 1}


def test_an_assertion_failure_in_a_fault_test_is_a_wrong_result(fresh: tally.Tally) -> None:
    _outcome(STORE, "failed", AssertionError("lost data"))
    _outcome(STORE, "failed", ValueError("escaped"))
    assert fresh.sections["wrong results"] == {"store faults: test_x": 1}
    assert fresh.sections["unhandled exceptions"] == {"store faults: ValueError": 1}
    assert fresh.sections["faults injected"] == {}


def test_a_failed_secret_test_is_a_secret_found(fresh: tally.Tally) -> None:
    _outcome(SECRETS, "failed", AssertionError("echoed"))
    assert fresh.sections["secrets found"] == {"secrets checked: test_x": 1}


def test_parts_are_shown_but_not_added_to_the_total(fresh: tally.Tally) -> None:
    fresh.add("inputs fuzzed", "telegram update JSON", 100)
    fresh.add_part("inputs fuzzed", "telegram update JSON", "SDK rejected", 60)
    fresh.add("inputs fuzzed", "slack event dicts", 300)
    lines = fresh.render().splitlines()
    total = next(line for line in lines if line.startswith("inputs fuzzed"))
    assert total.split()[-1] == "400"
    assert any(line.split()[-1] == "60" and "of which SDK rejected" in line for line in lines)
    # Must-be-zero sections are shown even when nothing was counted in them.
    assert any(line.startswith("wrong results") and line.split()[-1] == "0" for line in lines)
