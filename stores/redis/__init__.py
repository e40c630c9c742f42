"""The Redis store, shared by replicas (leases and cancel notices beside it)."""

from chatbridge.stores.redis.store import RedisStore

__all__ = ["RedisStore"]
