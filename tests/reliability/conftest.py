"""The reliability table also when only this directory runs without the plugin.

Outcome counting lives in `tests/reliability/plugin.py` (loaded with
`-p tests.reliability.plugin`, as `python -m tests.reliability` does); here
only the table is printed, at most once per run, for the fuzzers' own counts;
and the thread-run event loop the webhook fuzzers share.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.plugin import print_table
from tests.support.thread_loop import ThreadLoop


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    print_table(terminalreporter)


@pytest.fixture(scope="module")
def loop() -> Iterator[ThreadLoop]:
    """One event loop per module, on a thread: its server stays up across a
    hypothesis test's examples."""
    runner = ThreadLoop()
    yield runner
    runner.close()
