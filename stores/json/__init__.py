"""The JSON store: a few files under one lock, for small installs."""

from chatbridge.stores.json.store import JsonStore

__all__ = ["JsonStore"]
