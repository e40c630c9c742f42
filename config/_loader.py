"""Finding, reading and validating the config file.

The loader never reads `os.environ` itself: callers pass the environment, so
tests stay hermetic and the CLI decides what the process may see.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from ._env import ENV_DEFAULTS, merge_defaults, substitute
from ._errors import ConfigError, ConfigIssue, Loc, format_loc
from ._issues import issues_from_validation, line_for
from ._models import ChatbridgeConfig
from ._schema import prune_nulls
from ._yaml import parse_yaml

__all__ = ["DEFAULT_FILENAME", "ENV_VAR", "load_config", "load_config_text", "resolve_config_path"]

DEFAULT_FILENAME = "chatbridge.yaml"
ENV_VAR = "CHATBRIDGE_CONFIG"
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


def load_config(path: Path | None, environ: Mapping[str, str]) -> ChatbridgeConfig:
    """Load and validate `path`, or the built-in defaults when it is None."""
    if path is None:
        return load_config_text("", source=_DEFAULTS_SOURCE, environ=environ)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise _file_error(path, "no such file") from None
    except IsADirectoryError:
        raise _file_error(path, "is a directory") from None
    except PermissionError:
        raise _file_error(path, "permission denied") from None
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text (byte {exc.start})"
        raise _file_error(path, message) from None
    return load_config_text(text, source=str(path), environ=environ)


def load_config_text(text: str, *, source: str, environ: Mapping[str, str]) -> ChatbridgeConfig:
    """Validate YAML text; `source` is the file name used in messages.

    Raises `ConfigError` listing every problem found, sorted by line.
    """
    parsed = parse_yaml(text)
    issues = [
        ConfigIssue(file=source, line=line, path=path, message=msg)
        for line, path, msg in parsed.problems
    ]
    if parsed.data is None and issues:
        raise ConfigError(issues)  # unparseable: nothing left to validate
    data = {} if parsed.data is None else parsed.data
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"{type(data).__name__} {data!r}"
        sections = ", ".join(ChatbridgeConfig.model_fields)
        message = f"the top level must be a mapping of sections ({sections}), got {kind}"
        top = ConfigIssue(file=source, line=line_for(parsed.lines, ()), path="", message=message)
        raise ConfigError([*issues, top])

    data = merge_defaults(prune_nulls(data), ENV_DEFAULTS)
    expanded = substitute(data, environ)
    skip: set[Loc] = set()
    for loc, message in expanded.problems:
        line = line_for(parsed.lines, loc)
        issues.append(ConfigIssue(file=source, line=line, path=format_loc(loc), message=message))
        skip.add(loc)
    config: ChatbridgeConfig | None = None
    try:
        config = ChatbridgeConfig.model_validate(expanded.data)
    except ValidationError as exc:
        issues += issues_from_validation(exc, source=source, lines=parsed.lines, skip=skip)
    if issues or config is None:
        raise ConfigError(sorted(issues, key=lambda issue: issue.line or 0))
    return config


def _file_error(path: Path, message: str) -> ConfigError:
    """Problems with the file itself have no line: `FILE: message`."""
    return ConfigError([ConfigIssue(file=str(path), line=None, path="", message=message)])
