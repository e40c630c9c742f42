"""Pytest plugin for the reliability table: `-p tests.reliability.plugin`.

`tally_outcomes` counts, for the test files in `CATEGORIES`, each passed test
as one fault injected (or one check passed) of its kind, and each failure as
a finding in the section its category names: a failed secret test is a
secret found, a failed privacy test a leak found; in a fault or fuzz test an
assertion failure is a wrong result and any other exception an unhandled
exception. An xfail is a failure known in advance: counted as a finding of
its kind, marked "(known, xfail)", never as a fault injected.

The table is printed at the end of the run when CHATBRIDGE_RELIABILITY_TABLE=1
(see `python -m tests.reliability`); nothing is written to a file. Loaded as a
plugin because a conftest's hooks only see the tests below its directory.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import PurePosixPath

import pytest

from tests.support import tally

ENV = "CHATBRIDGE_RELIABILITY_TABLE"


@dataclass(frozen=True, slots=True)
class Category:
    """Tests in `file` (whose name contains `match`) count as `kind` in `section`."""

    file: str
    section: str | None  # None: passes are not counted (the test counts its own inputs)
    kind: str
    failures: str  # where a failure is counted
    match: str = ""


CATEGORIES: tuple[Category, ...] = (
    Category("tests/reliability/test_store_faults.py", "faults injected", "store faults",
             "unhandled exceptions"),
    Category("tests/providers/test_faults.py", "faults injected", "provider faults",
             "unhandled exceptions"),
    Category("tests/providers/test_misconfigured.py", "faults injected", "provider misconfigured",
             "unhandled exceptions"),
    Category("tests/core/test_delivery.py", "faults injected", "delivery floods",
             "unhandled exceptions", match="flood"),
    Category("tests/core/test_delivery.py", "faults injected", "delivery refused by platform",
             "unhandled exceptions", match="will_not_take"),
    Category("tests/scenarios/test_kill_loop.py", "faults injected", "kill loop (SIGKILL/SIGTERM)",
             "unhandled exceptions"),
    Category("tests/stores/test_crash.py", "crash runs", "store SIGKILL mid-commit",
             "unhandled exceptions"),
    Category("tests/reliability/test_config_secrets_never_echoed.py", "checks passed",
             "secrets checked", "secrets found"),
    Category("tests/reliability/test_config_fuzz.py", None, "config fuzz secrets",
             "secrets found", match="secret"),
    Category("tests/core/test_privacy.py", "checks passed", "leak checks", "leaks found"),
    # Issue 17: full store, damaged rows, Discord catch-up.
    Category("tests/platforms/telegram/test_full_store_intake.py", "faults injected",
             "store full (SQLITE_FULL: notice, no ack, readyz)", "unhandled exceptions"),
    Category("tests/platforms/discord/test_full_store.py", "faults injected",
             "store full (SQLITE_FULL: notice, no ack, readyz)", "unhandled exceptions"),
    Category("tests/scenarios/test_full_disk_run.py", "faults injected",
             "full disk (file size limit, tmpfs)", "unhandled exceptions"),
    Category("tests/reliability/test_damaged_rows.py", "faults injected",
             "damaged store rows (planted secret)", "unhandled exceptions"),
    Category("tests/platforms/discord/test_catch_up.py", "faults injected",
             "discord catch-up (restart, op 9)", "unhandled exceptions"),
    Category("tests/scenarios/test_discord_kill_catch_up.py", "faults injected",
             "discord kill series (catch-up)", "unhandled exceptions"),
    # Issue 17: the Slack mode, console bytes, waited-out 429s, look before posting again.
    *(
        Category(file, "faults injected", "slack mode (SLACK_APP_TOKEN exported)",
                 "unhandled exceptions")
        for file in ("tests/config/test_slack_mode.py",
                     "tests/platforms/slack/test_slack_mode_log.py")
    ),
    Category("tests/scenarios/test_console_bytes.py", "faults injected",
             "console input not UTF-8 (any stdin mode)", "unhandled exceptions"),
    *(
        Category(file, "faults injected", "429 waited out: one INFO/WARNING line",
                 "unhandled exceptions")
        for file in ("tests/platforms/telegram/test_telegram_log_levels.py",
                     "tests/platforms/slack/test_slack_log_levels.py",
                     "tests/platforms/discord/test_log_levels.py")
    ),
    *(
        Category(file, "faults injected", "look before posting again (unrecorded message)",
                 "unhandled exceptions")
        for file in ("tests/core/test_look_back.py",
                     "tests/platforms/slack/test_slack_look_back.py",
                     "tests/platforms/discord/test_look_back.py")
    ),
    Category("tests/scenarios/test_slack_kill_loop.py", "faults injected",
             "slack kill series (look back)", "unhandled exceptions"),
    *(
        Category(f"tests/reliability/{name}.py", None, name, "unhandled exceptions")
        for name in ("test_normaliser_fuzz", "test_config_fuzz", "test_input_fuzz",
                     "test_history_block", "test_webhook_edges")
    ),
)  # fmt: skip


def _category(item: pytest.Item) -> Category | None:
    path = PurePosixPath(item.nodeid.split("::", 1)[0])
    for category in CATEGORIES:
        if path == PurePosixPath(category.file) and category.match in item.name:
            return category
    return None


def tally_outcomes(item: pytest.Item, report: pytest.TestReport, excinfo: object) -> None:
    """Count one test phase's outcome for `item` (called once per phase)."""
    category = _category(item)
    if category is None:
        return
    if report.when == "call" and report.passed and category.section is not None:
        tally.add(category.section, category.kind)
        return
    xfail = report.skipped and hasattr(report, "wasxfail")
    if not (report.failed or xfail):
        return
    known = " (known, xfail)" if xfail else ""
    if category.failures != "unhandled exceptions":
        tally.add(category.failures, f"{category.kind}: {item.name}{known}")
        return
    exc = getattr(excinfo, "value", None)
    if isinstance(exc, AssertionError):  # the fault gave a wrong result
        tally.add("wrong results", f"{category.kind}: {item.name}{known}")
    else:  # an exception escaped (or a strict xfail passed: exc is None)
        name = type(exc).__name__ if exc is not None else "error"
        tally.add("unhandled exceptions", f"{category.kind}: {name}{known}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    tally_outcomes(item, report, call.excinfo)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    print_table(terminalreporter)


def print_table(terminalreporter: pytest.TerminalReporter) -> None:
    """The table, once per run, if CHATBRIDGE_RELIABILITY_TABLE=1 and anything was tallied."""
    if os.environ.get(ENV) != "1" or tally.TALLY.empty() or tally.TALLY.printed:
        return
    tally.TALLY.printed = True
    terminalreporter.write_sep("=", "reliability table")
    for line in tally.render().splitlines():
        terminalreporter.write_line(line)
