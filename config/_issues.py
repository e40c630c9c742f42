"""Turns pydantic's `ValidationError` into `ConfigIssue`s worded for admins."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from ._errors import ConfigIssue, FieldIssues, Loc, format_loc
from ._providers import RESERVED_PROVIDER_KEYS
from ._schema import allowed_keys, is_secret
from ._shown import shown

__all__ = ["issues_from_validation", "line_for"]

_MAPPING_TYPES = {"model_type", "model_attributes_type", "dict_type"}
_LIST_TYPES = {"tuple_type", "list_type"}


def line_for(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the deepest existing node on `loc`: a missing key is blamed on its parent."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def issues_from_validation(
    exc: ValidationError, *, source: str, lines: dict[Loc, int], skip: set[Loc]
) -> list[ConfigIssue]:
    """One issue per problem; locations in `skip` were already reported another way."""
    issues = []
    for error in exc.errors(include_url=False):
        for loc, message in _explain(error):
            if any(loc[: len(done)] == done for done in skip):
                continue
            line = line_for(lines, loc)
            issues.append(
                ConfigIssue(file=source, line=line, path=format_loc(loc), message=message)
            )
    return issues


def _explain(error: Any) -> list[tuple[Loc, str]]:
    loc: Loc = tuple(part for part in error["loc"] if part != "[key]")
    kind: str = error["type"]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, FieldIssues):
        return [((*loc, *sub), message) for sub, message in cause.items]
    if kind == "extra_forbidden":
        return [(loc, _unknown_key(loc))]
    if kind == "missing":
        return [(loc, "required key is missing")]
    if kind in _MAPPING_TYPES:
        if len(loc) == 2 and loc[0] == "providers":
            close = difflib.get_close_matches(str(loc[1]), RESERVED_PROVIDER_KEYS, n=1)
            if close:
                return [(loc, f"unknown key; did you mean {close[0]!r}?")]
            got = _kind(error, loc)
            return [(loc, f"expected a provider entry (a mapping with 'type'), got {got}")]
        return [(loc, f"expected a mapping, got {_kind(error, loc)}")]
    if kind in _LIST_TYPES:
        return [(loc, f"expected a list, got {_kind(error, loc)}")]
    if kind == "value_error":
        return [(loc, str(error["msg"]).removeprefix("Value error, "))]
    return [(loc, error["msg"] + _got(loc, error["input"]))]


def _unknown_key(loc: Loc) -> str:
    allowed = allowed_keys(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; expected one of: {', '.join(allowed)}" if allowed else "unknown key"


SECRET_SECTIONS = ("platforms", "providers")


def _kind(error: Any, loc: Loc = ()) -> str:
    """What was found instead. Under `platforms` and `providers` only its type:
    a section written as a scalar there is often a pasted token
    (`telegram: 123456:AAH…`), so the value is never echoed."""
    value = error["input"]
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if loc and loc[0] in SECRET_SECTIONS:
        return f"a {type(value).__name__}"
    return f"{type(value).__name__} {shown(value)}"


def _got(loc: Loc, value: Any) -> str:
    """Echo what was parsed — never secrets, never long values — so the admin sees the clash."""
    if is_secret(loc):
        return ""
    if isinstance(value, list | dict) or value is None:
        return f" (got {_kind({'input': value})})"
    if not isinstance(value, str | int | float | bool):
        return ""
    return f" (got {shown(value)})"
