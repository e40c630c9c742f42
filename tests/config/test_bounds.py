"""Bounded time and memory for any input: alias bombs, deep nesting, huge files and numbers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from chatbridge.config import ConfigError, load_config, load_config_text
from tests.config._helpers import load_error, load_ok, render

BOMB = "".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
        *(
            f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def _one_line(error: ConfigError) -> str:
    lines = render(error)
    assert len(lines) == 1, lines
    assert "\n" not in lines[0]
    return lines[0]


def test_the_342_byte_alias_bomb_fails_fast_in_one_line(tmp_path: Path) -> None:
    assert len(BOMB.encode()) == 342
    started = time.perf_counter()
    error = load_error(tmp_path, BOMB)
    assert time.perf_counter() - started < 2.0
    assert _one_line(error).endswith("aliases expand to more than 10000 values")


def test_more_than_100_aliases_are_refused(tmp_path: Path) -> None:
    text = "bot: &b {language: en}\nx: [" + ", ".join(["*b"] * 101) + "]\n"
    assert "more than 100 aliases" in _one_line(load_error(tmp_path, text))


def test_a_few_aliases_and_merges_still_work(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        providers:
          base: &base {type: openai, model: m, timeout: 20s}
          main:
            <<: *base
            model: n
          default: main
          fallback: [base]
        """,
    )
    assert cfg.providers.entries["main"].timeout == 20.0
    assert cfg.providers.entries["main"].model == "n"


@pytest.mark.parametrize(
    "text",
    [
        "bot: " + "[" * 500 + "]" * 500 + "\n",
        "bot: " + "{a: " * 500 + "1" + "}" * 500 + "\n",
        "".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "v\n",
    ],
    ids=["flow-lists", "flow-maps", "block-maps"],
)
def test_500_deep_nesting_is_one_line_without_recursion_error(tmp_path: Path, text: str) -> None:
    assert "nested deeper than 50 levels" in _one_line(load_error(tmp_path, text))


def test_aliases_cannot_stack_shallow_nodes_into_a_deep_tree(tmp_path: Path) -> None:
    lines = ["a0: &a0 " + "[" * 40 + "1" + "]" * 40]
    lines += [f"a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40 for i in range(1, 5)]
    assert "nested deeper than 50 levels" in _one_line(load_error(tmp_path, "\n".join(lines)))


def test_a_file_over_1_mib_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text("# padding\n" * 110_000)
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert [str(i) for i in info.value.issues] == [
        f"{path}: larger than 1 MiB; a config file is a few KiB"
    ]


def test_text_over_1_mib_is_refused_too() -> None:
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config_text("#" * (1024 * 1024 + 1), source="x.yaml", environ={})


def test_an_integer_of_5000_digits_is_one_line(tmp_path: Path) -> None:
    line = _one_line(load_error(tmp_path, "memory:\n  max_entries: " + "9" * 5000 + "\n"))
    assert line.startswith("FILE:2: memory.max_entries: ")


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("memory:\n  max_entries: " + "9" * 400, "memory.max_entries"),
        ("engine:\n  session_ttl: " + "9" * 400, "engine.session_ttl"),
        ("engine:\n  session_ttl: " + "9" * 400 + "d", "engine.session_ttl"),
        ("engine:\n  shutdown_grace: 1e999", "engine.shutdown_grace"),
        ("server:\n  port: " + "9" * 400, "server.port"),
        ("platforms:\n  discord:\n    shard_ids: [" + "9" * 400 + "]", "platforms.discord"),
    ],
)
def test_huge_numbers_are_config_errors_not_overflow(tmp_path: Path, text: str, path: str) -> None:
    line = _one_line(load_error(tmp_path, text + "\n"))
    assert line.startswith("FILE:"), line
    assert f": {path}" in line, line
    assert "9" * 61 not in line  # long inputs are not echoed


# (section, key, largest accepted, smallest refused above it)
BOUNDS = [
    ("engine", "session_max_turns", 10_000, 10_001),
    ("engine", "session_max_tokens", 2_000_000, 2_000_001),
    ("engine", "max_message_chars", 200_000, 200_001),
    ("engine", "session_ttl", "30d", "31d"),
    ("engine", "shutdown_grace", 2_592_000, 2_592_001),
    ("engine", "redeliver_within", "30d", "30d1s"),
    ("memory", "max_entries", 10_000, 10_001),
    ("memory", "max_age", "365d", "366d"),
    ("memory", "user_chars", 100_000, 100_001),
    ("memory", "summary_chars", 100_000, 100_001),
    ("server", "port", 65535, 65536),
]


@pytest.mark.parametrize(("section", "key", "ok", "bad"), BOUNDS)
def test_every_number_has_an_upper_bound(
    tmp_path: Path, section: str, key: str, ok: object, bad: object
) -> None:
    extra = "  inject_entries: 0\n" if section == "memory" else ""
    load_ok(tmp_path, f"{section}:\n  {key}: {ok}\n{extra}")
    line = _one_line(load_error(tmp_path, f"{section}:\n  {key}: {bad}\n{extra}"))
    assert line.startswith(f"FILE:2: {section}.{key}: "), line


@pytest.mark.parametrize(
    ("key", "ok", "bad"),
    [("timeout", "1h", "61m"), ("max_retries", 100, 101), ("max_tokens", 1_000_000, 1_000_001)],
)
def test_provider_numbers_are_bounded(tmp_path: Path, key: str, ok: object, bad: object) -> None:
    head = "providers:\n  main:\n    type: debug\n"
    load_ok(tmp_path, f"{head}    {key}: {ok}\n")
    line = _one_line(load_error(tmp_path, f"{head}    {key}: {bad}\n"))
    assert line.startswith(f"FILE:4: providers.main.{key}: "), line


def test_max_message_chars_defaults_to_8000_and_has_a_floor(tmp_path: Path) -> None:
    assert load_config(None, {}).engine.max_message_chars == 8000
    line = _one_line(load_error(tmp_path, "engine:\n  max_message_chars: 199\n"))
    assert line.startswith("FILE:2: engine.max_message_chars: ")


def test_an_impossible_date_is_one_line(tmp_path: Path) -> None:
    line = _one_line(load_error(tmp_path, "bot:\n  system_prompt: 2024-13-45\n"))
    assert line.startswith("FILE:2: bot.system_prompt: ")
