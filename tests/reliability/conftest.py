"""The reliability table also when only this directory runs without the plugin.

Outcome counting lives in `tests/reliability/plugin.py` (loaded with
`-p tests.reliability.plugin`, as `python -m tests.reliability` does); here
only the table is printed, at most once per run, for the fuzzers' own counts.
"""

from __future__ import annotations

import pytest

from tests.reliability.plugin import print_table


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    print_table(terminalreporter)
