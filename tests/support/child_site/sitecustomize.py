"""Run by Python at start-up in every child the tests start (it is on their
PYTHONPATH, see `tests.support.network_guard.child_pythonpath`): the child may
reach loopback addresses only, like the test process itself."""

from tests.support.network_guard import install

install()
