"""Who talks to the bot in the tests, by platform user ID.

One definition instead of one per file. Telegram's private chat with a user
has the user's ID, so these are chat IDs there too.
"""

from __future__ import annotations

ALICE = 579304651
"""The allowed user of most scenario tests."""
BOB = 579304652
"""A second user, for privacy and concurrency stories."""
CAROL = 579304653
"""A third user, for the kill series."""
