from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.stores.helpers import (
    BACKENDS,
    AnyStore,
    Stores,
    opened,
    purge_redis,
    redis_prefix,
    store_path,
)
from tests.support.redis_server import redis_unavailable


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "redis" and (reason := redis_unavailable()):
        pytest.skip(reason)
    return str(request.param)


@pytest.fixture
def path(backend: str, tmp_path: Path) -> Iterator[Path]:
    """The store's file; for redis it names a key prefix, whose keys go afterwards."""
    path = store_path(backend, tmp_path)
    yield path
    if backend == "redis":
        purge_redis(redis_prefix(path))


@pytest.fixture
async def store(backend: str, path: Path) -> AsyncIterator[AnyStore]:
    """An opened store of each backend (max_entries=5), closed afterwards."""
    s = await opened(backend, path)
    yield s
    await s.aclose()


@pytest.fixture
async def stores() -> AsyncIterator[Stores]:
    """`store = await stores(backend, path)`: opened, and closed after the test
    however it ended; for tests that open, close and reopen (see `Stores`)."""
    opened_ = Stores()
    yield opened_
    await opened_.aclose()
