"""Store faults: a -wal that is not the store's own (another file's, another
store's, or an older one of its own), damaged rows, a full disk.

A refused open names the file in one sentence, quotes no stored text and
leaves every file beside the store byte-identical (sha256 before/after).
"""

from __future__ import annotations

import sqlite3
import struct
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreCorrupt, StoreError
from chatbridge.stores.json import JsonStore
from chatbridge.stores.sqlite import SqliteStore
from chatbridge.stores.sqlite import _wal as _sqlite_wal
from chatbridge.stores.sqlite._check import wal_problem
from tests.stores.helpers import AnyStore, exchange, opened, snapshot, store_path
from tests.support.closing import Closing
from tests.support.small_disk import small_tmpfs

SECRET = "private-4c1e"  # in every stored text; must never appear in an error


async def _store(path: Path, tag: str, n: int = 5) -> None:
    store = await opened("sqlite", path, max_entries=1000)
    for i in range(n):
        await store.commit_exchange(exchange(f"{SECRET} {tag} {i}", user=f"u{i}"))
    await store.aclose()


async def _hot(path: Path, tag: str, *, rows: int = 3) -> tuple[bytes, bytes]:
    """db and -wal bytes as chatbridge killed after `rows` more commits leaves them:
    a closed store of five exchanges, reopened, `rows` commits (users w0, w1, …)."""
    await _store(path, tag)
    store = await opened("sqlite", path, max_entries=1000)
    for i in range(rows):
        await store.commit_exchange(exchange(f"{SECRET} {tag} wal {i}", user=f"w{i}", key=f"w{i}"))
    files = _read(path), _read(Path(f"{path}-wal"))  # what a SIGKILL leaves
    await store.aclose()
    return files


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _place(path: Path, db: bytes, wal: bytes) -> None:
    for leftover in path.parent.glob(f"{path.name}*"):
        leftover.unlink()
    path.write_bytes(db)
    Path(f"{path}-wal").write_bytes(wal)


def _with_header(wal: bytes, **fields: int) -> bytes:
    """`wal` with header fields replaced and the header checksum recomputed."""
    names = ("magic", "version", "page", "seq", "salt1", "salt2")
    values = dict(zip(names, struct.unpack(">6I", wal[:24]), strict=True)) | fields
    head = struct.pack(">6I", *(values[n] for n in names))
    words = struct.unpack("<6I", head)  # magic 0x377f0682: little-endian checksum words
    s1 = s2 = 0
    for i in range(0, 6, 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return head + struct.pack(">2I", s1, s2) + wal[32:]


def _salt1(wal: bytes) -> int:
    return int(struct.unpack(">I", wal[16:20])[0])


WalEdit = Callable[[bytes, Path], bytes]


def _foreign(page_size: int | None = None) -> WalEdit:
    """Another application's database's WAL (it rewrites page 1, the schema),
    made beside the store; with `page_size`, its pages are of that size
    instead of SQLite's default, which is ours too."""

    def edit(wal: bytes, path: Path) -> bytes:
        other = path.with_name("other.db")
        db = sqlite3.connect(other, isolation_level=None)
        if page_size is not None:
            db.execute(f"PRAGMA page_size = {page_size}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("CREATE TABLE notes(body TEXT)")
        db.execute("INSERT INTO notes VALUES (?)", (SECRET,))
        foreign = Path(f"{other}-wal").read_bytes()
        db.close()
        other.unlink()
        return foreign

    return edit


def _flip(offset: int) -> WalEdit:
    def edit(wal: bytes, path: Path) -> bytes:
        return wal[:offset] + bytes([wal[offset] ^ 0x5A]) + wal[offset + 1 :]

    return edit


WAL_CASES: dict[str, tuple[WalEdit, str]] = {
    "garbage": (lambda w, p: bytes(range(256)) * 20, "not a SQLite WAL file"),
    "too-short": (lambda w, p: w[:20], "too short"),
    "version": (lambda w, p: _with_header(w, version=3007001), "unknown WAL format"),
    "page-size": (_foreign(page_size=1024), "pages are 1024 bytes"),
    "header-checksum": (_flip(20), "header checksum"),  # salt-2 changed, checksum not
    "frame-salt": (_flip(32 + 8), "first frame is from another WAL"),
    "foreign-app": (_foreign(), "no chatbridge tables"),
}


@pytest.mark.parametrize("case", sorted(WAL_CASES))
async def test_foreign_wal_is_refused_and_untouched(case: str, tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    db, wal = await _hot(path, "ours")
    edit, reason = WAL_CASES[case]
    _place(path, db, edit(wal, path))
    if case != "foreign-app":  # refused before SQLite sees it: a stale -shm stays as it is
        _write(Path(f"{path}-shm"), b"\0" * 32768)
    before = snapshot(tmp_path)

    with pytest.raises(StoreCorrupt) as err:
        await opened("sqlite", path)

    message = str(err.value)
    assert reason in message
    assert str(path) in message
    assert "\n" not in message
    assert SECRET not in message
    assert snapshot(tmp_path) == before


async def test_own_hot_wal_is_replayed(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    db, wal = await _hot(path, "ours")
    _place(path, db, wal)
    _write(Path(f"{path}-shm"), bytes(range(256)) * 128)  # garbage index: SQLite rebuilds it
    store = await opened("sqlite", path)
    try:
        entries = await store.ring("w2", since=0)
        assert [e.user_message for e in entries] == [f"{SECRET} ours wal 2"]
    finally:
        await store.aclose()
    assert set(snapshot(path.parent)) == {path.name}


async def test_wal_of_a_restart_killed_before_its_first_frame_is_ignored(tmp_path: Path) -> None:
    """SQLite's own window: new header (salt-1 + 1), old frames. SQLite replays none."""
    path = store_path("sqlite", tmp_path)
    db, wal = await _hot(path, "ours")
    restarted = _with_header(wal, salt1=(_salt1(wal) + 1) % 2**32, salt2=12345, seq=1)
    assert wal_problem_of(restarted, 4096) is None
    _place(path, db, restarted)
    store = await opened("sqlite", path)
    try:
        assert await store.ring("w0", since=0) == []  # the old frames were not replayed
        assert len(await store.ring("u1", since=0)) == 1
    finally:
        await store.aclose()


def wal_problem_of(data: bytes, page: int) -> str | None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        wal = Path(d) / "x.db-wal"
        wal.write_bytes(data)
        return wal_problem(wal, page)


async def test_shm_without_wal_is_harmless(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    await _store(path, "ours")
    _write(Path(f"{path}-shm"), bytes(range(256)) * 128)
    store = await opened("sqlite", path)
    try:
        assert len(await store.ring("u3", since=0)) == 1
    finally:
        await store.aclose()


async def test_wal_of_a_sibling_store_with_the_same_layout_is_refused(tmp_path: Path) -> None:
    """Same schema, same page layout, a valid WAL: only the store id tells them apart."""
    path, sibling = store_path("sqlite", tmp_path), tmp_path / "b" / "b.db"
    db, _ = await _hot(path, "ours")
    sibling.parent.mkdir()
    _, foreign = await _hot(sibling, "theirs")
    assert wal_problem_of(foreign, 4096) is None  # the file format cannot tell
    _place(path, db, foreign)
    before = snapshot(tmp_path)
    with pytest.raises(StoreCorrupt) as err:
        await opened("sqlite", path)
    assert "the WAL of another chatbridge store" in str(err.value)
    assert SECRET not in str(err.value)
    assert snapshot(tmp_path) == before


# --- an older -wal of the store's own (see stores/sqlite/_wal.py) --------


async def _commits(path: Path, tag: str, n: int) -> None:
    store = await opened("sqlite", path, max_entries=1000)
    for i in range(n):
        await store.commit_exchange(exchange(f"{tag} {i}", user=f"{tag}{i % 3}", key=f"{tag}{i}"))
    await store.aclose()


@pytest.mark.parametrize("later_session", [False, True])
@pytest.mark.parametrize("commits", [1, 3, 10, 30])
async def test_an_older_wal_of_the_store_itself_is_refused(
    commits: int, later_session: bool, tmp_path: Path
) -> None:
    """A copy of the -wal taken while the store ran, put back after newer
    exchanges were checkpointed into the file (at that run's close, or by a
    later run). Short texts and few commits: the replay would break nothing
    SQLite can see, it would only lose the newer exchanges."""
    path = store_path("sqlite", tmp_path)
    store = await opened("sqlite", path, max_entries=1000)
    for i in range(commits):
        await store.commit_exchange(exchange(f"old {i}", user=f"u{i % 3}", key=f"k{i}"))
    old_wal = _read(Path(f"{path}-wal"))
    await store.commit_exchange(exchange("newer", user="u0", key="newer"))
    await store.aclose()
    if later_session:
        await _commits(path, "new", commits)
    _write(Path(f"{path}-wal"), old_wal)
    assert wal_problem_of(old_wal, 4096) is None  # the file format cannot tell
    before = snapshot(tmp_path)

    with pytest.raises(StoreCorrupt) as err:
        await opened("sqlite", path)

    message = str(err.value)
    assert "older than the database's last checkpoint" in message
    assert f"{path}-wal" in message
    assert "\n" not in message
    assert snapshot(tmp_path) == before


async def _newer_by_forget(store: SqliteStore) -> None:
    await store.forget("u1")


async def _newer_by_periodic_checkpoint(store: SqliteStore) -> None:
    for i in range(_sqlite_wal.CHECKPOINT_EVERY):
        await store.inbox_done(f"none:{i}")  # a write each, however small


@pytest.mark.parametrize("generation", ["first", "later"])
@pytest.mark.parametrize("checkpoint", [_newer_by_forget, _newer_by_periodic_checkpoint])
async def test_an_older_wal_swapped_in_after_a_checkpoint_and_a_kill_is_refused(
    checkpoint: Callable[[SqliteStore], Awaitable[None]],
    generation: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process is killed (no close) after a checkpoint of its own and
    newer commits; its live -wal is then replaced by a copy taken before
    that checkpoint, in the run's first WAL generation or a later one."""
    monkeypatch.setattr(_sqlite_wal, "CHECKPOINT_EVERY", 50)
    path = store_path("sqlite", tmp_path)
    store = await opened("sqlite", path, max_entries=1000)
    assert isinstance(store, SqliteStore)
    if generation == "later":
        await store.commit_exchange(exchange("first", user="u9", key="first"))
        await checkpoint(store)  # the WAL restarts at the next write
    for i in range(3):
        await store.commit_exchange(exchange(f"old {i}", user=f"u{i}", key=f"k{i}"))
    old_wal = _read(Path(f"{path}-wal"))
    await checkpoint(store)
    await store.commit_exchange(exchange("newer", user="u2", key="n"))
    killed = _read(path)  # what a SIGKILL leaves of the file
    await store.aclose()
    _place(path, killed, old_wal)

    with pytest.raises(StoreCorrupt) as err:
        await opened("sqlite", path)
    assert "older than the database's last checkpoint" in str(err.value)


async def test_the_live_wal_of_a_killed_store_is_replayed_after_its_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side: checkpoints, new WAL generations and a kill (db and
    -wal copied together) lose nothing and are not refused."""
    monkeypatch.setattr(_sqlite_wal, "CHECKPOINT_EVERY", 7)
    path = store_path("sqlite", tmp_path)
    store = await opened("sqlite", path, max_entries=1000)
    for i in range(40):
        await store.commit_exchange(exchange(f"kept {i}", user="u", key=f"k{i}", ts=i))
        if i == 20:
            await store.forget("nobody")  # a TRUNCATE checkpoint in between
    db, wal = _read(path), _read(Path(f"{path}-wal"))
    await store.aclose()
    _place(path, db, wal)
    reopened = await opened("sqlite", path, max_entries=1000)
    try:
        assert len(await reopened.ring("u", since=-1)) == 40
    finally:
        await reopened.aclose()


# --- damaged rows ---------------------------------------------------------

ROW_CASES = {
    "ring-text-blob": (
        f"UPDATE ring SET user_message = CAST('{SECRET} blob' AS BLOB) WHERE user = 'u2'",
        "ring.user_message holds a wrong type in 1 row(s)",
    ),
    # TEXT affinity turns numbers into text, so in SQL only a blob can break a text column.
    "session-user-blob": ("UPDATE sessions SET user = x'00ff'", "sessions.user"),
    "ring-timestamp-text": (f"UPDATE ring SET timestamp = '{SECRET}'", "ring.timestamp"),
    "turn-content-blob": (
        f"UPDATE turns SET content = x'{SECRET.encode().hex()}'",
        "turns.content",
    ),
    "usage-real": ("UPDATE usage SET input_tokens = 1.5", "usage.input_tokens"),
    "inbox-json": (
        "INSERT INTO inbox(key, received_at, message, sent) "
        f"VALUES ('t:1', 1, '{{\"{SECRET}', '[]')",
        "inbox.message holds malformed JSON",
    ),
}


@pytest.mark.parametrize("case", sorted(ROW_CASES))
async def test_damaged_row_is_refused_without_quoting_it(case: str, tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    await _store(path, "ours")
    statement, reason = ROW_CASES[case]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(statement)
    db.close()
    before = snapshot(tmp_path)

    with pytest.raises(StoreCorrupt) as err:
        await opened("sqlite", path)

    message = str(err.value)
    assert reason in message
    assert SECRET not in message
    assert "left untouched" in message
    assert snapshot(tmp_path) == before


async def _open_then_written(path: Path, closing: Closing, *writes: tuple[str, object]) -> AnyStore:
    """The store at `path` (five exchanges) opened, then each (statement,
    parameter) of `writes` run on it by another connection, as another
    program damaging the file under a running bot would."""
    await _store(path, "ours")
    store = closing(await opened("sqlite", path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        for statement, parameter in writes:
            other.execute(statement, (parameter,))
    finally:
        other.close()
    return store


async def test_row_damaged_while_open_is_skipped_on_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, closing: Closing
) -> None:
    """Issue 17.3: a damaged row costs that row (it was StoreCorrupt for the read)."""
    path = store_path("sqlite", tmp_path)
    store = await _open_then_written(
        path,
        closing,
        ("UPDATE ring SET user_message = CAST(? AS BLOB)", SECRET),
        ("UPDATE sessions SET started_at = ?", SECRET),
    )
    assert await store.ring("u1", since=0) == []
    assert await store.load_session("u1:chat") is None
    assert str(path) in caplog.text
    assert SECRET not in caplog.text


async def test_inbox_message_of_the_wrong_shape_is_skipped_on_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, closing: Closing
) -> None:
    message = f'{{"text": "{SECRET}", "kind": "{SECRET}"}}'
    store = await _open_then_written(
        store_path("sqlite", tmp_path),
        closing,
        ("INSERT INTO inbox(key, received_at, message, sent) VALUES ('t:9', 1, ?, '[]')", message),
    )
    assert [e.key for e in await store.inbox_pending()] == []
    assert "'t:9'" in caplog.text
    assert SECRET not in caplog.text


# --- full disk ------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (needs root and mount permission, else the test is skipped)."""
    with small_tmpfs(tmp_path, "256k") as mount:
        yield mount


@pytest.mark.parametrize("backend", ["json", "sqlite"])
async def test_full_disk_leaves_no_temp_files_and_loses_nothing_committed(
    backend: str, small_disk: Path
) -> None:
    path = store_path(backend, small_disk)
    store = await opened(backend, path, max_entries=1000)
    assert isinstance(store, JsonStore | SqliteStore)
    committed, failure = 0, None
    for i in range(10_000):
        try:
            await store.commit_exchange(exchange(f"{SECRET} {i} " + "z" * 2000, user="u", ts=i))
        except StoreError as err:
            failure = str(err)
            break
        committed += 1
    assert committed > 0
    assert failure is not None, "the disk never filled"
    assert SECRET not in failure
    assert "\n" not in failure
    assert not _temp_files(small_disk), "a temp file was left behind"
    try:
        await store.aclose()
    except StoreError:
        pass  # the final checkpoint may not fit either
    assert not _temp_files(small_disk)
    _grow(small_disk)
    reopened = await opened(backend, path, max_entries=1000)
    try:
        entries = await reopened.ring("u", since=-1)
        assert len(entries) >= committed  # every acknowledged commit survived
    finally:
        await reopened.aclose()


def _temp_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.endswith(".tmp")]


def _grow(mount: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=8m", str(mount)], check=True)
