"""Error types shared by the models and the loader.

Admins fix config files by line number, so every problem becomes a
`ConfigIssue` carrying file, line and key path, and the loader reports all of
them at once instead of making the admin fix one error per restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["ConfigError", "ConfigIssue", "FieldIssues", "Loc"]

Loc = tuple[str | int, ...]
"""A key path as pydantic spells it: mapping keys and list indices."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigIssue:
    """One problem in one place; `str()` gives the `FILE:LINE: path: message` form."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(Exception):
    """The configuration cannot be used; `.issues` lists every problem found."""

    def __init__(self, issues: Iterable[ConfigIssue]) -> None:
        self.issues: list[ConfigIssue] = list(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class FieldIssues(ValueError):
    """Raised by cross-field validators to blame several keys below the model.

    Pydantic turns a validator's ValueError into one error located at the model
    itself; the loader finds this exception in the error's context and splits it
    back into one issue per `(relative loc, message)` so each gets its own line.
    """

    def __init__(self, items: Sequence[tuple[Loc, str]]) -> None:
        self.items: tuple[tuple[Loc, str], ...] = tuple(items)
        super().__init__("; ".join(f"{format_loc(loc)}: {msg}" for loc, msg in self.items))


def format_loc(loc: Loc) -> str:
    """Render `('access', 'allow', 1)` as `access.allow[1]`, the way admins read YAML."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def raise_if(items: list[tuple[Loc, str]]) -> None:
    """Raise `FieldIssues` when a validator collected anything; keeps validators flat."""
    if items:
        raise FieldIssues(items)
