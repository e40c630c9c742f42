"""Finding, reading and validating the config file.

The loader never reads `os.environ` itself: callers pass the environment, so
tests stay hermetic and the CLI decides what the process may see.

Steps: size check, YAML (bounded, see `_yaml`), nulls pruned, env defaults
merged (a section's mode keys only when the file sets none of them,
`_env.MODE_KEYS`), sections outside `only` dropped, `<field>_file` clashes,
`${VAR}` substitution, secret files read, pydantic validation. Every step adds issues
instead of stopping, so the admin sees all problems at once.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._env import ENV_DEFAULTS, is_active, merge_defaults, mode_defaults, substitute
from ._errors import ConfigError, ConfigIssue, Loc, format_loc
from ._issues import issues_from_validation, line_for
from ._models import BASE_DIR, WITHOUT_PROVIDERS, ChatbridgeConfig
from ._platforms import MODE_FROM_ENVIRONMENT
from ._schema import prune_nulls
from ._scopes import scope_platform
from ._secret_files import FILE_SUFFIX, read_file_keys, split_file_keys
from ._yaml import parse_yaml

__all__ = [
    "DEFAULT_FILENAME",
    "ENV_VAR",
    "MAX_FILE_BYTES",
    "load_config",
    "load_config_text",
    "resolve_config_path",
]

DEFAULT_FILENAME = "chatbridge.yaml"
ENV_VAR = "CHATBRIDGE_CONFIG"
MAX_FILE_BYTES = 1024 * 1024
"""Config files are a few KiB; a bigger one is a mistake (or an attack), refused unread."""
_DEFAULTS_SOURCE = "<defaults>"


def resolve_config_path(
    cli_value: str | None, environ: Mapping[str, str], cwd: Path
) -> Path | None:
    """`--config`, else `$CHATBRIDGE_CONFIG`, else `./chatbridge.yaml` if present, else None.

    Explicit choices are returned even if missing, so `load_config` can say
    "no such file" instead of silently falling back to defaults.
    """
    for explicit in (cli_value, environ.get(ENV_VAR)):
        if explicit:
            path = Path(explicit).expanduser()
            return path if path.is_absolute() else cwd / path
    candidate = cwd / DEFAULT_FILENAME
    return candidate if candidate.is_file() else None


def load_config(
    path: Path | None, environ: Mapping[str, str], *, only: Collection[str] | None = None
) -> ChatbridgeConfig:
    """Load and validate `path`, or the built-in defaults when it is None.

    Relative paths in the file (`memory.path`, `<field>_file`) are resolved
    against the file's directory. `only` names the top-level sections to
    validate (e.g. `("memory", "identities", "access")` for the admin
    commands): the others keep their defaults and their `${VAR}`s are not
    read, but unknown top-level keys are still errors.
    """
    if path is None:
        return load_config_text("", source=_DEFAULTS_SOURCE, environ=environ, only=only)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise _file_error(path, "larger than 1 MiB; a config file is a few KiB")
        text = raw.decode("utf-8-sig")
    except FileNotFoundError:
        raise _file_error(path, "no such file") from None
    except IsADirectoryError:
        raise _file_error(path, "is a directory") from None
    except PermissionError:
        raise _file_error(path, "permission denied") from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, raw, exc) from None
    except OSError as exc:
        raise _file_error(path, (exc.strerror or "cannot be read").lower()) from None
    base_dir = path.absolute().parent
    return load_config_text(text, source=str(path), environ=environ, base_dir=base_dir, only=only)


def load_config_text(
    text: str,
    *,
    source: str,
    environ: Mapping[str, str],
    base_dir: Path | None = None,
    only: Collection[str] | None = None,
) -> ChatbridgeConfig:
    """Validate YAML text; `source` is the file name used in messages.

    `base_dir` anchors relative paths (None: the working directory); `only`
    as for `load_config`. Raises `ConfigError` listing every problem found,
    sorted by line.
    """
    unknown = set(only or ()) - set(ChatbridgeConfig.model_fields)
    if unknown:
        raise ValueError(f"only= names unknown sections: {', '.join(sorted(unknown))}")
    if len(text) > MAX_FILE_BYTES:
        raise _file_error(Path(source), "larger than 1 MiB; a config file is a few KiB")
    parsed = parse_yaml(text)
    issues = [
        ConfigIssue(file=source, line=line, path=path, message=msg)
        for line, path, msg in parsed.problems
    ]
    if parsed.data is None and issues:
        raise ConfigError(issues)  # unparseable: nothing left to validate
    data = {} if parsed.data is None else parsed.data
    if not isinstance(data, dict):
        # Only the type: a file holding nothing but a pasted token must not echo it.
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        sections = ", ".join(ChatbridgeConfig.model_fields)
        message = f"the top level must be a mapping of sections ({sections}), got {kind}"
        top = ConfigIssue(file=source, line=line_for(parsed.lines, ()), path="", message=message)
        raise ConfigError([*issues, top])

    data = prune_nulls(data)
    defaults, mode_from_env = mode_defaults(data, ENV_DEFAULTS)
    data = _sections(merge_defaults(data, defaults), only)
    problems = split_file_keys(data)
    expanded = substitute(data, environ)
    problems += expanded.problems
    problems += [
        (loc, message)
        for loc, message in read_file_keys(expanded.data, base_dir=base_dir)
        if is_active(expanded.data, loc)
    ]
    skip: set[Loc] = set()
    for loc, message in problems:
        line = line_for(parsed.lines, loc)
        issues.append(ConfigIssue(file=source, line=line, path=format_loc(loc), message=message))
        # The field a `_file` key stands for is not reported again ("required").
        skip.update({loc, (*loc[:-1], str(loc[-1]).removesuffix(FILE_SUFFIX))} if loc else {loc})
    config: ChatbridgeConfig | None = None
    context: dict[str, object] = {MODE_FROM_ENVIRONMENT: mode_from_env}
    if base_dir is not None:
        context[BASE_DIR] = base_dir
    if only is not None and "providers" not in only:
        context[WITHOUT_PROVIDERS] = True
    try:
        config = ChatbridgeConfig.model_validate(expanded.data, context=context)
    except ValidationError as exc:
        issues += issues_from_validation(exc, source=source, lines=parsed.lines, skip=skip)
    if issues or config is None:
        referenced = _REFERENCE.findall(text) + _REFERENCE.findall(repr(ENV_DEFAULTS))
        values = [environ.get(name, "") for name in referenced]
        issues = [_without_values(issue, values) for issue in issues]
        raise ConfigError(sorted(issues, key=lambda issue: issue.line or 0))
    config._warnings = tuple(_warnings(config, source, parsed.lines))
    return config


def _warnings(config: ChatbridgeConfig, source: str, lines: dict[Loc, int]) -> list[ConfigIssue]:
    """A scope for a platform that is not enabled: kept, but it applies to nothing yet."""
    enabled = set(config.platforms.enabled)
    found = []
    for scope_id in config.scopes:
        platform = scope_platform(scope_id)
        if platform not in enabled:
            loc: Loc = ("scopes", scope_id)
            message = (
                f"warning: platforms.{platform} is not enabled, so this scope applies to "
                "nothing until it is"
            )
            line = line_for(lines, loc)
            found.append(ConfigIssue(file=source, line=line, path=format_loc(loc), message=message))
    return found


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def _without_values(issue: ConfigIssue, values: Iterable[str]) -> ConfigIssue:
    """The issue with any environment value masked: a `${VAR}` substituted
    into a field whose message quotes its input must not print the secret."""
    message = issue.message
    for value in sorted((v for v in values if len(v) >= 6), key=len, reverse=True):
        for quoted in (repr(value), f'"{value}"'):  # messages quote inputs with repr
            message = message.replace(quoted, "[value from the environment]")
    return issue if message == issue.message else replace(issue, message=message)


def _sections(data: dict[str, Any], only: Collection[str] | None) -> dict[str, Any]:
    """Drop the known sections not in `only`; unknown keys stay, to be reported."""
    if only is None:
        return data
    known = ChatbridgeConfig.model_fields
    return {key: value for key, value in data.items() if key in only or key not in known}


def _not_utf8(path: Path, raw: bytes, exc: UnicodeDecodeError) -> ConfigError:
    """`FILE:LINE: byte 0xfc is not UTF-8 …`: the line of the first bad byte."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        message = "this is UTF-16 text; save the file as UTF-8"
        return ConfigError([ConfigIssue(file=str(path), line=1, path="", message=message)])
    line = raw.count(b"\n", 0, exc.start) + 1
    message = (
        f"byte 0x{raw[exc.start]:02x} is not UTF-8 text; save the file as UTF-8 "
        "(an editor set to Latin-1 or Windows-1252 writes umlauts this way)"
    )
    return ConfigError([ConfigIssue(file=str(path), line=line, path="", message=message)])


def _file_error(path: Path, message: str) -> ConfigError:
    """Problems with the file itself have no line: `FILE: message`."""
    return ConfigError([ConfigIssue(file=str(path), line=None, path="", message=message)])
