"""The factories behind the `testbot`, `stores` and `closing` fixtures close
everything they opened, also what a test closed early itself, so a failed
assert in the middle of a test leaks no connection, lock or WAL; and no test
goes back to closing things itself at its end."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreError
from tests.stores.helpers import Stores, store_path
from tests.support.closing import Closing
from tests.support.paths import REPO
from tests.support.testbot import TestBots


def _wal(path: Path) -> Path:
    return path.with_name(f"{path.name}-wal")


async def test_testbots_close_every_bot_they_made(tmp_path: Path) -> None:
    bots = TestBots(tmp_path)
    first = await bots()
    assert "echo: Hallo" in await first.say("Hallo")
    second = await bots(tmp_path / "second")
    await second.aclose()  # closed early by the test: closing again is fine
    await bots.aclose()
    for bot in (first, second):
        with pytest.raises(StoreError, match="not open"):
            await bot.engine.store.ring("telegram:1", since=0)


@pytest.mark.parametrize("backend", ["sqlite", "json"])
async def test_stores_close_every_store_they_opened(tmp_path: Path, backend: str) -> None:
    stores = Stores()
    path = store_path(backend, tmp_path)
    first = await stores(backend, path)
    await first.aclose()
    again = await stores(backend, path)  # the JSON lock was free again
    await stores.aclose()
    with pytest.raises(StoreError, match="not open"):
        await again.ring("telegram:1", since=0)
    if backend == "sqlite":
        assert not _wal(path).exists(), "the last close did not checkpoint"


async def test_closing_closes_everything_newest_first_also_after_a_failure() -> None:
    order: list[str] = []

    class Thing:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        async def aclose(self) -> None:
            order.append(self.name)
            if self.fails:
                raise OSError(self.name)

    things = Closing()
    first = things(Thing("first"))
    things(Thing("broken", fails=True))
    things(Thing("last"))
    assert first.name == "first"  # handed back as it came
    with pytest.raises(OSError, match="broken"):
        await things.aclose()
    assert order == ["last", "broken", "first"]


# -- no test closes what it opened as its last step ---------------------------

_ENDS_A_BLOCK = (ast.AsyncFunctionDef, ast.FunctionDef, ast.With, ast.AsyncWith, ast.For,
                 ast.AsyncFor, ast.While)  # fmt: skip


def _is_aclose(statement: ast.stmt) -> bool:
    """`await <anything>.aclose()` as a statement of its own."""
    match statement:
        case ast.Expr(ast.Await(ast.Call(ast.Attribute(attr="aclose")))):
            return True
    return False


def _expects_an_error(node: ast.AST) -> bool:
    """`with pytest.raises(…)`: the close in it is what the test checks."""
    return isinstance(node, ast.With) and any(
        ast.unparse(item.context_expr).startswith("pytest.raises(") for item in node.items
    )


def _closes_at_the_end(test: ast.AsyncFunctionDef | ast.FunctionDef) -> Iterator[int]:
    """Lines of `await x.aclose()` that end the test, a `with` or a loop body
    (only more such closes after them): cleanup that an earlier failed assert
    skips. A close inside `finally`, or one the test goes on to check, is fine."""
    for node in ast.walk(test):
        if isinstance(node, _ENDS_A_BLOCK) and not _expects_an_error(node):
            body = node.body
            while body and _is_aclose(body[-1]):
                yield body[-1].lineno
                body = body[:-1]


def _tests(source: str) -> Iterator[ast.AsyncFunctionDef | ast.FunctionDef]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.name.startswith(
            "test_"
        ):
            yield node


def _bare_closes(source: str) -> list[int]:
    return [line for test in _tests(source) for line in _closes_at_the_end(test)]


def test_no_test_closes_what_it_opened_at_its_end() -> None:
    """Close in a fixture (`testbot`, `stores`, `closing`), `async with` or
    `finally` instead: those run also after a failed assert."""
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for line in _bare_closes(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "closed at the end of a test: " + ", ".join(found)


def test_no_test_builds_its_test_bot_by_hand() -> None:
    """`make_testbot` is the factory's own; tests take the `testbot` fixture."""
    found = [
        f"{path.relative_to(REPO)}:{test.name}"
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        for test in _tests(path.read_text(encoding="utf-8"))
        if any(
            isinstance(call, ast.Call) and ast.unparse(call.func) == "make_testbot"
            for call in ast.walk(test)
        )
    ]
    assert found == [], "built by hand: " + ", ".join(found)


@pytest.mark.parametrize(
    "body",
    [
        "    bot = await make()\n    assert bot\n    await bot.aclose()\n",
        "    async with f() as x:\n        s = g(x)\n        await s.aclose()\n    assert x\n",
        "    for n in range(2):\n        s = await o(n)\n        await s.aclose()\n",
        "    a, b = await o(), await o()\n    await a.aclose()\n    await b.aclose()\n",
    ],
)
def test_the_check_sees_a_close_at_the_end(body: str) -> None:
    assert _bare_closes(f"async def test_x() -> None:\n{body}")


@pytest.mark.parametrize(
    "body",
    [
        "    s = await o()\n    try:\n        assert s\n    finally:\n        await s.aclose()\n",
        "    s = await o()\n    await s.aclose()  # a restart\n    assert await o()\n",
        "    if x:\n        await s.aclose()\n    assert s\n",
        "    with pytest.raises(OSError):\n        await s.aclose()\n",
    ],
)
def test_the_check_lets_a_close_the_test_goes_on_from_pass(body: str) -> None:
    assert _bare_closes(f"async def test_x() -> None:\n{body}") == []
