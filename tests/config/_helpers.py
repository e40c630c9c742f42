"""Shared helpers: write YAML to a temp file, load it, and render issues file-independently."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from chatbridge.config import ChatbridgeConfig, ConfigError, load_config

__all__ = ["load_error", "load_ok", "render"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_error(
    tmp_path: Path, text: str, *, environ: Mapping[str, str] | None = None
) -> ConfigError:
    """Write `text` (dedented) to tmp_path and return the ConfigError loading it raises."""
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ or {})
    for issue in info.value.issues:
        assert issue.file == str(path)
    return info.value


def load_ok(
    tmp_path: Path, text: str, *, environ: Mapping[str, str] | None = None
) -> ChatbridgeConfig:
    """Write `text` (dedented) to tmp_path and load it, expecting success."""
    return load_config(_write(tmp_path, text), environ or {})


def render(error: ConfigError) -> list[str]:
    """Issue lines with the temp file name replaced by `FILE`, so tests can compare exactly."""
    return [str(issue).replace(issue.file, "FILE", 1) for issue in error.issues]
