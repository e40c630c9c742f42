"""Issue 20: the `scopes:` section — well-formed IDs, known keys, real providers,
each mistake as `FILE:LINE: scopes.<id>[.<key>]: message`; a scope for a
platform that is not enabled is a warning."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from chatbridge.config._scopes import ScopeSettings, check_scope_id, top_level_of
from chatbridge.core.app.cli import main
from tests.config._helpers import load_error, load_ok

PROVIDERS = """
providers:
  default: main
  main: {type: debug}
  backup: {type: openai, model: gpt-backup, api_key: sk-x}
"""


@pytest.mark.parametrize(
    "scope_id",
    [
        "telegram",
        "telegram:-1001234567890",
        "telegram:579304651",
        "discord",
        "discord:234567890123456789",
        "discord:guild:123456789012345678",
        "slack",
        "slack:team:T0123",
        "slack:C0TEAM",
        "slack:G0PRIVATE",
        "slack:D0DIRECT",
    ],
)
def test_well_formed_scope_ids(scope_id: str) -> None:
    assert check_scope_id(scope_id) == scope_id


@pytest.mark.parametrize(
    ("scope_id", "hint"),
    [
        ("slack:general", "channel ID"),
        ("telegram:@chemitek", "numeric ID"),
        ("discord:guild:abc", "digits"),
        ("slack:team:general", "team ID"),
        ("console", "use one of"),
        ("matrix:!room", "use one of"),
        ("discord:#support", "channel ID"),
    ],
)
def test_malformed_scope_ids_say_why(scope_id: str, hint: str) -> None:
    with pytest.raises(ValueError, match=hint):
        check_scope_id(scope_id)


def test_the_three_error_kinds_each_with_file_line_and_key_path(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        PROVIDERS
        + """
scopes:
  "slack:general":
    language: en
  telegram:-1001:
    system_promt: hi
""",
    )
    lines = [str(issue) for issue in error.issues]
    path = tmp_path / "chatbridge.yaml"
    assert f"{path}:8: scopes.slack:general: malformed scope ID 'slack:general'" in lines[0]
    assert lines[1] == (
        f"{path}:11: scopes.telegram:-1001.system_promt: unknown key; did you mean 'system_prompt'?"
    )
    # Pydantic reports cross-references only once the shapes are right: a second file.
    error = load_error(tmp_path, PROVIDERS + "scopes:\n  telegram:\n    provider: backpu\n")
    assert [str(issue) for issue in error.issues] == [
        f"{path}:8: scopes.telegram.provider: no provider named 'backpu'; did you mean "
        "'backup'? (known: main, backup)"
    ]


def test_config_check_exits_2_naming_each_scope_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(PROVIDERS + "scopes:\n  discord:guild:x: {model: m}\n")
    assert main(["config", "check", "--config", str(path)], environ={}) == 2
    err = capsys.readouterr().err
    assert f"{path}:7: scopes.discord:guild:x: malformed scope ID" in err


def test_a_scope_for_a_disabled_platform_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(PROVIDERS + "scopes:\n  discord:1234: {provider: backup}\n")
    assert main(["config", "check", "--config", str(path)], environ={}) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1
    assert "ok:" in out
    assert f"{path}:7: scopes.discord:1234: warning: platforms.discord is not enabled" in err


def test_every_scope_key_validates_like_its_top_level_key(tmp_path: Path) -> None:
    config = load_ok(
        tmp_path,
        PROVIDERS
        + """
scopes:
  "telegram:-1001234567890":
    system_prompt: "Du bist der Support-Bot."
    provider: backup
    model: gpt-small
    language: en
    session_ttl: 10m
    session_max_turns: 6
    inject_entries: 0
    require_mention: false
  telegram:
""",
    )
    scope = config.scopes["telegram:-1001234567890"]
    assert scope.session_ttl == 600.0
    assert (scope.provider, scope.model, scope.require_mention) == ("backup", "gpt-small", False)
    assert config.scopes["telegram"] == ScopeSettings()
    error = load_error(
        tmp_path, "scopes:\n  slack:C0TEAM:\n    language: fr\n    session_ttl: soon\n"
    )
    assert [issue.path for issue in error.issues] == [
        "scopes.slack:C0TEAM.language",
        "scopes.slack:C0TEAM.session_ttl",
    ]


def test_a_model_without_any_provider_entry_is_an_error(tmp_path: Path) -> None:
    error = load_error(tmp_path, "scopes:\n  telegram: {model: gpt-5.4}\n")
    assert "needs a providers entry" in str(error)


def test_each_key_names_the_top_level_setting_it_overrides() -> None:
    config_paths = {key: top_level_of(key).path for key in ScopeSettings.model_fields}
    assert config_paths["system_prompt"] == "bot.system_prompt"
    assert config_paths["session_ttl"] == "engine.session_ttl"
    assert config_paths["inject_entries"] == "memory.inject_entries"
    assert top_level_of("require_mention").default is True


def test_quoted_and_bare_scope_keys_are_the_same(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """
        scopes:
          "telegram:-100123": {language: en}
          discord:guild:42: {language: de}
        """
    )
    config = load_ok(tmp_path, text)
    assert set(config.scopes) == {"telegram:-100123", "discord:guild:42"}


def test_the_readme_scopes_example_validates(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Scopes", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = load_ok(tmp_path, PROVIDERS + example)
    assert {scope.partition(":")[0] for scope in config.scopes} == {
        "telegram",
        "discord",
        "slack",
    }
    assert config.scopes["telegram:-1001234567890"].require_mention is False
