from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.core.store.helpers import BACKENDS, AnyStore, opened, store_path


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def path(backend: str, tmp_path: Path) -> Path:
    return store_path(backend, tmp_path)


@pytest.fixture
async def store(backend: str, path: Path) -> AsyncIterator[AnyStore]:
    """An opened store of each backend (max_entries=5), closed afterwards."""
    s = await opened(backend, path)
    yield s
    await s.aclose()
