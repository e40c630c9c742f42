"""Run by Python at start-up in every child the tests start (it is on their
PYTHONPATH, see `tests.support.network_guard.child_pythonpath`): the child may
reach loopback addresses only, like the test process itself.

`TESTS_HIDE_MODULES=discord,redis` makes those packages look not installed
in the child (`tests/scenarios/test_optional_sdks.py`): None in sys.modules
is Python's own import blocker, so `import discord` raises
ModuleNotFoundError and `importlib.util.find_spec("discord")` answers None,
as on a machine without the package.
"""

import os
import sys

from tests.support.network_guard import install

install()
for _name in filter(None, os.environ.get("TESTS_HIDE_MODULES", "").split(",")):
    sys.modules[_name] = None  # type: ignore[assignment]  # the blocker is None by design
