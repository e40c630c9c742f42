from __future__ import annotations

import pytest

from tests.support.testbot import TestBot, TestBots


@pytest.fixture
async def bot(testbot: TestBots) -> TestBot:
    """The default test bot, closed after the test by the `testbot` factory."""
    return await testbot()
