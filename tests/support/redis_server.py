"""A Redis server of the test run's own, never a developer's.

The first call to `redis_url()` in a process starts `redis-server` on a free
loopback port with nothing on disk (a temp dir, no RDB, no AOF) and stops it
when the process exits, so each xdist worker has its own server and a test
may FLUSHDB it freely. `CHATBRIDGE_TEST_REDIS_URL` names a server to use
instead (e.g. where redis-server is not installed); tests then only ever
touch keys under their own prefix and never flush.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
import time
from urllib.parse import urlsplit, urlunsplit

import redis

from tests.support.cli import free_port

__all__ = ["flush_allowed", "redis_unavailable", "redis_url"]

ENV_URL = "CHATBRIDGE_TEST_REDIS_URL"


@functools.cache
def _server() -> str:
    """The base URL (no DB) of our own server, started on first use; "" if none can be."""
    if os.environ.get(ENV_URL):
        given = urlsplit(os.environ[ENV_URL])
        return urlunsplit((given.scheme, given.netloc, "", "", ""))  # the DB is ours to pick
    binary = shutil.which("redis-server")
    if binary is None:
        return ""
    home = tempfile.mkdtemp(prefix="cbtest-redis-")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", home, "--logfile", os.path.join(home, "redis.log"), "--databases", "16"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    atexit.register(_stop, process, home)
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return ""
        try:
            with redis.Redis.from_url(url, socket_connect_timeout=0.5) as client:
                client.ping()
            return url
        except (OSError, redis.RedisError):
            time.sleep(0.02)
    return ""


def _stop(process: subprocess.Popen[bytes], home: str) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(home, ignore_errors=True)


def redis_url(db: int = 0) -> str:
    """`redis://127.0.0.1:PORT/DB` of the run's own server (see module docstring)."""
    base = _server() or "redis://127.0.0.1:1"  # nothing listens there: tests then skip or fail
    return f"{base}/{db}"


def flush_allowed() -> bool:
    """True when the server is this run's own, so whole databases may be flushed."""
    return not os.environ.get(ENV_URL)


@functools.cache
def redis_unavailable() -> str:
    """Why the redis tests cannot run here, or "" when the server answers PING."""
    url = redis_url()
    reason = ""
    if not _server():
        reason = f"redis-server is not installed and ${ENV_URL} is not set"
    else:
        try:
            with redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0) as c:
                c.ping()
        except (OSError, redis.RedisError) as err:
            reason = f"the test Redis server at {url} failed: {err}"
    if reason and os.environ.get("CHATBRIDGE_REQUIRE_REDIS"):
        # CI sets this: a missing Redis must fail the run, not skip 40 tests.
        raise RuntimeError(f"Redis is required here but {reason}")
    return reason
