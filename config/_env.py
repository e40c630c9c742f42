"""`${VAR}` / `${VAR:-default}` substitution and env-backed defaults.

Secrets belong in the environment, not in a file that ends up in backups, so any
string may reference a variable. A missing variable only matters where it is
used: a disabled platform or an unreferenced provider entry may name variables
that are not set on this machine.

`${NAME}` with NAME unset or empty reads the file named by `$NAME_FILE` when
that is set (the Docker secrets convention); both set is an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import Loc
from ._providers import RESERVED_PROVIDER_KEYS
from ._secret_files import FILE_SUFFIX, SecretFileError, read_secret_file

__all__ = [
    "ENV_DEFAULTS",
    "MODE_KEYS",
    "Substitution",
    "is_active",
    "merge_defaults",
    "mode_defaults",
    "substitute",
]

_Found = list[tuple[Loc, str]]

_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{")
_MISSING = object()
_TRUE = {"true", "yes", "on", "1", "y", "t"}

ENV_DEFAULTS: dict[str, Any] = {
    "platforms": {
        "telegram": {"token": "${TELEGRAM_BOT_TOKEN}"},
        "discord": {"token": "${DISCORD_BOT_TOKEN}"},
        "slack": {
            "bot_token": "${SLACK_BOT_TOKEN}",
            "app_token": "${SLACK_APP_TOKEN:-}",
            "signing_secret": "${SLACK_SIGNING_SECRET:-}",
        },
    },
}
"""Applied under the file's keys: enabling a platform picks its token up from the usual variable."""

MODE_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("platforms", "slack"): ("app_token", "signing_secret"),
}
"""Keys that together choose a section's mode (Slack: Socket Mode or HTTP events).
Their `ENV_DEFAULTS` apply only when the file sets none of them (nor a `_file`
twin): a config that names `signing_secret` is HTTP mode even on a machine
that exports `SLACK_APP_TOKEN` for another app."""


@dataclass(frozen=True, slots=True)
class Substitution:
    """Result of `substitute`: the new data and the problems that count.

    `problems` are (loc, message); values with a missing variable are removed
    from `data`, so the field default applies and validation can carry on.
    """

    data: Any
    problems: list[tuple[Loc, str]]


def substitute(data: Any, environ: Mapping[str, str]) -> Substitution:
    """Replace references in every string scalar, then keep only relevant missing ones."""
    missing: _Found = []
    syntax: _Found = []
    result = _walk(data, (), environ, missing, syntax)
    problems = list(syntax)
    problems += [(loc, message) for loc, message in missing if is_active(result, loc)]
    return Substitution(result, problems)


def _walk(value: Any, loc: Loc, environ: Mapping[str, str], missing: _Found, syntax: _Found) -> Any:
    """Rebuild the data with references expanded; `_MISSING` marks values to drop."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            new = _walk(item, (*loc, key), environ, missing, syntax)
            if new is not _MISSING:
                out[key] = new
        return out
    if isinstance(value, list):
        items = [_walk(item, (*loc, i), environ, missing, syntax) for i, item in enumerate(value)]
        return ["" if item is _MISSING else item for item in items]
    if isinstance(value, str) and "$" in value:
        return _expand(value, loc, environ, missing, syntax)
    return value


def _expand(
    text: str, loc: Loc, environ: Mapping[str, str], missing: _Found, syntax: _Found
) -> Any:
    """Shell semantics for `:-`: the default applies when the variable is unset or empty.

    `missing` collects (loc, message) for values that cannot be formed; they
    count only where the value is used (`is_active`).
    """
    absent = False

    def replace(match: re.Match[str]) -> str:
        nonlocal absent
        whole, name, default = match.group(0), match.group(1), match.group(2)
        if whole == "$$":
            return "$"
        if name is None:
            syntax.append((loc, "malformed ${...}: use ${NAME} or ${NAME:-default} ($$ for '$')"))
            return whole
        found = environ.get(name, "")
        file_name = environ.get(name + "_FILE", "").strip()
        problem = None
        if found and file_name:
            problem = f"environment variables {name} and {name}_FILE are both set; use one"
        elif found:
            return found
        elif file_name:
            try:
                return read_secret_file(Path(file_name).expanduser())
            except SecretFileError as exc:
                problem = f"{name}_FILE: {exc}"
        elif default is not None:
            return default
        missing.append((loc, problem or f"environment variable {name} is not set"))
        absent = True
        return ""

    expanded = _REF.sub(replace, text)
    return _MISSING if absent else expanded


def is_active(data: Any, loc: Loc) -> bool:
    """Whether a value missing at `loc` must be reported (see module docstring)."""
    if len(loc) >= 3 and loc[0] == "platforms":
        if loc[2] == "enabled":
            return True
        section = _get(data, loc[:2])
        return isinstance(section, dict) and _truthy(section.get("enabled"))
    if len(loc) >= 3 and loc[0] == "providers" and loc[1] not in RESERVED_PROVIDER_KEYS:
        providers = _get(data, ("providers",))
        if not isinstance(providers, dict):
            return True
        entries = [key for key in providers if key not in RESERVED_PROVIDER_KEYS]
        fallback = providers.get("fallback")
        referenced = providers.get("default") == loc[1] or (
            isinstance(fallback, list) and loc[1] in fallback
        )
        return referenced or len(entries) == 1
    return True


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        if not isinstance(data, dict):
            return None
        data = data.get(str(part))
    return data


def _truthy(value: Any) -> bool:
    """Mirror pydantic's lax bool parsing closely enough to decide enabled-ness."""
    if isinstance(value, bool | int):
        return bool(value)
    return isinstance(value, str) and value.strip().lower() in _TRUE


def merge_defaults(data: Any, defaults: Mapping[str, Any]) -> Any:
    """Deep-merge `defaults` under `data`; the file always wins, non-mappings are left alone."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for key, default in defaults.items():
        if key not in out:
            if key + FILE_SUFFIX not in out:  # `token_file:` replaces the default `token:`
                out[key] = default
        elif isinstance(default, Mapping):
            out[key] = merge_defaults(out[key], default)
    return out


def mode_defaults(data: Any, defaults: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """`defaults` without the `MODE_KEYS` of sections whose file sets one of them,
    and the dotted names of the sections whose mode the defaults choose."""
    out: dict[str, Any] = _copy(defaults)
    from_env: set[str] = set()
    for section, keys in MODE_KEYS.items():
        given = _get(data, section)
        named = isinstance(given, dict) and any(
            k in given or k + FILE_SUFFIX in given for k in keys
        )
        if named:
            target = _get(out, section)
            if isinstance(target, dict):
                for key in keys:
                    target.pop(key, None)
        else:
            from_env.add(".".join(section))
    return out, frozenset(from_env)


def _copy(value: Any) -> Any:
    """A deep copy of nested dicts (leaves are shared; they are strings)."""
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, Mapping) else value
