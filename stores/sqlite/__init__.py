"""The SQLite store: one file, WAL mode, every write one transaction."""

from chatbridge.stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
