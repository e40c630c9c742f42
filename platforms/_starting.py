"""Start-up failures as one sentence: one helper for every adapter.

Each adapter names the SDK exceptions it can explain (`StartFailures`: a
rejected token, a missing intent, Socket Mode refused); every other failure
reads "<platform> could not start (<Type>: <message>)". Either way the
adapter has closed what it opened, and the SDK's exception is not chained
(some SDKs quote the token in their messages).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from chatbridge.core.ports import PlatformStartFailed
from chatbridge.platforms._runtime import one_line

__all__ = ["StartFailures", "start_or_fail"]

StartFailures = Sequence[tuple[type[Exception], str | Callable[[Exception], str]]]
"""(SDK exception class, the sentence or a function making it); the first
class the exception is an instance of wins."""


async def start_or_fail(
    platform: str,
    start: Callable[[], Awaitable[None]],
    *,
    failures: StartFailures,
    close: Callable[[], Awaitable[None]],
) -> None:
    """`await start()`; when it raises, `await close()`, then raise
    `PlatformStartFailed` with one sentence (a `PlatformStartFailed` from
    `start` as it is). Cancellation closes too and propagates."""
    try:
        await start()
    except PlatformStartFailed:
        await close()
        raise
    except Exception as exc:
        await close()
        raise PlatformStartFailed(sentence(platform, exc, failures)) from None
    except BaseException:
        await close()
        raise


def sentence(platform: str, exc: Exception, failures: StartFailures) -> str:
    """The one sentence for `exc` by `failures`, else the generic one."""
    for kind, said in failures:
        if isinstance(exc, kind):
            return said if isinstance(said, str) else said(exc)
    return f"{platform} could not start ({type(exc).__name__}: {one_line(exc)})"
