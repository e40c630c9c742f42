"""Secrets read from files: `<field>_file: /path` keys and the `VAR_FILE` convention.

Docker and Kubernetes hand secrets over as files (`/run/secrets/<name>`), so
any secret field (`token`, `api_key`, …) may name a file instead of holding the
value, and a `${VAR}` whose variable is unset reads `$VAR_FILE` when that is
set. Setting both the value and the file is an error: which one wins would be
a guess. Messages name the file, never its content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import Loc
from ._schema import is_secret

__all__ = [
    "FILE_SUFFIX",
    "MAX_SECRET_BYTES",
    "SecretFileError",
    "env_secret",
    "read_file_keys",
    "read_secret_file",
    "split_file_keys",
]

FILE_SUFFIX = "_file"
MAX_SECRET_BYTES = 64 * 1024
"""A token or key is well under 1 KiB; the bound keeps `/dev/zero` from filling memory."""


class SecretFileError(ValueError):
    """A secret file cannot be used; the message names the file and why."""


def read_secret_file(path: Path) -> str:
    """The file's text without its trailing newline(s); `SecretFileError` otherwise.

    Opened non-blocking and checked to be a regular file, so a FIFO or a
    device cannot stall start-up.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise SecretFileError(f"cannot read secret file {path}: no such file") from None
    except PermissionError:
        raise SecretFileError(f"cannot read secret file {path}: permission denied") from None
    except OSError as exc:
        reason = (exc.strerror or "cannot open it").lower()
        raise SecretFileError(f"cannot read secret file {path}: {reason}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SecretFileError(f"cannot read secret file {path}: not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(MAX_SECRET_BYTES + 1)
        except OSError as exc:
            reason = (exc.strerror or "read failed").lower()
            raise SecretFileError(f"cannot read secret file {path}: {reason}") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise SecretFileError(f"secret file {path} is larger than 64 KiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SecretFileError(f"secret file {path} is not UTF-8 text") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise SecretFileError(f"secret file {path} is empty")
    return text


def _file_keys(data: Any, loc: Loc = ()) -> list[tuple[dict[str, Any], Loc, str]]:
    """(mapping, its loc, field) for every `<field>_file` key beside a secret field."""
    found: list[tuple[dict[str, Any], Loc, str]] = []
    if not isinstance(data, dict):
        return found
    for key, value in data.items():
        field = key.removesuffix(FILE_SUFFIX)
        if key != field and field and is_secret((*loc, field)):
            found.append((data, loc, field))
        found += _file_keys(value, (*loc, key))
    return found


def split_file_keys(data: Any) -> list[tuple[Loc, str]]:
    """Before `${VAR}` substitution: report (and drop) a value set beside its `_file`.

    Works in place on `data`; returns (loc, message) for the `_file` keys. A
    blank value (`""`, `${VAR:-}` written literally as empty) counts as unset.
    """
    problems: list[tuple[Loc, str]] = []
    for mapping, loc, field in _file_keys(data):
        value = mapping.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            mapping.pop(field, None)
            continue
        del mapping[field], mapping[field + FILE_SUFFIX]
        message = f"set either {field} or {field}{FILE_SUFFIX}, not both"
        problems.append(((*loc, field + FILE_SUFFIX), message))
    return problems


def read_file_keys(data: Any, *, base_dir: Path | None) -> list[tuple[Loc, str]]:
    """After substitution: replace each `<field>_file: PATH` by `<field>: <content>`.

    Works in place on `data`; relative paths are relative to `base_dir` (the
    config file's directory) when given. Returns (loc, message) per unreadable
    file, located at the `_file` key.
    """
    problems: list[tuple[Loc, str]] = []
    for mapping, loc, field in _file_keys(data):
        key = field + FILE_SUFFIX
        raw = mapping.pop(key)
        if not isinstance(raw, str) or not raw.strip():
            problems.append(((*loc, key), "expected the path of a file holding the secret"))
            continue
        path = Path(raw.strip()).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        try:
            mapping[field] = read_secret_file(path)
        except SecretFileError as exc:
            problems.append(((*loc, key), str(exc)))
    return problems


def env_secret(environ: Mapping[str, str], variable: str) -> str:
    """`$variable`, else the content of the file `$variable_FILE` names, else "".

    Raises `SecretFileError` when both are set or the file cannot be used.
    """
    value = environ.get(variable, "").strip()
    path = environ.get(f"{variable}_FILE", "").strip()
    if value and path:
        raise SecretFileError(
            f"environment variables {variable} and {variable}_FILE are both set; use one"
        )
    if path:
        return read_secret_file(Path(path)).strip()
    return value
