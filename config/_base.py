"""The base every config model shares, plus small reusable field types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, SecretStr

__all__ = ["OptionalSecret", "OptionalStr", "Section", "blank_to_none"]


class Section(BaseModel):
    """Frozen, strict about unknown keys, documented by attribute docstrings.

    Frozen because one config object is shared by every task for the life of the
    process; `extra="forbid"` because a typo'd key silently ignored is the most
    expensive kind of config bug.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def blank_to_none(value: Any) -> Any:
    """`""` means "not set": an unset `${VAR:-}` or an empty YAML string both land here."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


OptionalSecret = Annotated[SecretStr | None, BeforeValidator(blank_to_none)]
"""A secret that may be unset; `SecretStr` keeps it out of reprs and logs."""
OptionalStr = Annotated[str | None, BeforeValidator(blank_to_none)]
"""A plain string that may be unset; `""` (e.g. from `${VAR:-}`) counts as unset."""
