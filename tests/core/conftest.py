from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.testbot import TestBot, make_testbot


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[TestBot]:
    testbot = await make_testbot(tmp_path)
    yield testbot
    await testbot.engine.store.aclose()
