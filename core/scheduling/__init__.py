"""The two `ConversationScheduler`s (see `core.ports.scheduling`).

`local.LocalScheduler` for one process; `shared.SharedInboxScheduler` for
replicas sharing an inbox, given leases and cancel notices by the store
backend (the composition root wires them; nothing here imports a backend).
"""

from chatbridge.core.scheduling.local import LocalScheduler
from chatbridge.core.scheduling.locks import KeyedLocks
from chatbridge.core.scheduling.shared import SharedInboxScheduler

__all__ = ["KeyedLocks", "LocalScheduler", "SharedInboxScheduler"]
