"""`python -m tests.reliability [--long]`: the reliability suite and its table.

Runs pytest in this process (serially: the tally is per process) on
tests/reliability, the store crash test, the kill loop and the fault test
files, with `-p tests.reliability.plugin` and CHATBRIDGE_RELIABILITY_TABLE=1,
and prints the table at the end. `--long` sets CHATBRIDGE_FUZZ_EXAMPLES=2000
and CHATBRIDGE_KILLS=100 (about 5 minutes of kill loop alone). Other
arguments are passed on to pytest. Nothing is written to a file.
"""

from __future__ import annotations

import os
import sys

import pytest

TARGETS = (
    "tests/reliability",
    "tests/stores/test_crash.py",
    "tests/scenarios/test_kill_loop.py",
    "tests/providers/test_faults.py",
    "tests/providers/test_misconfigured.py",
    "tests/core/test_delivery.py",
    "tests/core/test_privacy.py",
    "tests/platforms/telegram/test_full_store_intake.py",
    "tests/platforms/discord/test_full_store.py",
    "tests/platforms/discord/test_catch_up.py",
    "tests/scenarios/test_full_disk_run.py",
    "tests/scenarios/test_discord_kill_catch_up.py",
    "tests/config/test_slack_mode.py",
    "tests/platforms/slack/test_slack_mode_log.py",
    "tests/scenarios/test_console_bytes.py",
    "tests/platforms/telegram/test_telegram_log_levels.py",
    "tests/platforms/slack/test_slack_log_levels.py",
    "tests/platforms/discord/test_log_levels.py",
    "tests/core/test_look_back.py",
    "tests/platforms/slack/test_slack_look_back.py",
    "tests/platforms/discord/test_look_back.py",
    "tests/scenarios/test_slack_kill_loop.py",
)


def main(argv: list[str]) -> int:
    long = "--long" in argv
    rest = [a for a in argv if a != "--long"]
    os.environ["CHATBRIDGE_RELIABILITY_TABLE"] = "1"
    if long:
        os.environ["CHATBRIDGE_FUZZ_EXAMPLES"] = "2000"
        os.environ["CHATBRIDGE_KILLS"] = "100"
    args = ["-n", "0", "-p", "tests.reliability.plugin", *TARGETS, *rest]
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
