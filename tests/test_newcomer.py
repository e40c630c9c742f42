"""A newcomer's first hour: clone, the README's two commands, and the bot answers.

The commands are read from README.md's "Quick start" block (the first for the
main job, the second for the tests), so README and this test cannot drift.
The repository is cloned from this work tree's committed HEAD into a temp
folder, with no virtualenv, no tokens and no API keys in the environment; the
main-job command sets up (a virtualenv, `pip install`: slow, hence `slow`)
and runs `chatbridge chat` with one line piped in, which must be answered.
The test command is not run here (it would run this suite inside itself):
its make target is checked to run pytest in that same virtualenv, and the
README's way onto PATH (`. .venv/bin/activate`) is tried with `--version`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO

QUESTION = "Wo bleibt das Chemitek-Paket?"


def quick_start() -> list[str]:
    """The command lines of the first ```sh block under `## Quick start`."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no Quick start section"
    block = re.search(r"^```sh\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the Quick start section has no sh block"
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def _fresh_environment(home: Path) -> dict[str, str]:
    """What a newcomer's shell has: no virtualenv active, no keys, no overrides.

    Nor an outer make's variables: under `make test` the inner `make chat`
    would otherwise print "make[1]: Entering directory" before its banner, and
    take the outer `ARGS=` (make exports command-line variables)."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "ARGS"
        and not k.endswith(("_API_KEY", "_TOKEN", "_API_KEY_FILE"))
        and not k.startswith(
            ("CHATBRIDGE_", "PYTEST", "VIRTUAL_ENV", "PYTHONPATH", "MAKE", "MFLAGS")
        )
    }
    return env | {"PATH": path, "HOME": str(home)}


def test_the_two_commands_name_a_main_job_and_the_tests() -> None:
    main_job, tests, *rest = quick_start()
    assert rest == [], f"more than two set-up commands: {rest}"
    assert main_job == "make chat"
    assert tests == "make test"


@pytest.fixture
def clone(tmp_path: Path) -> Iterator[Path]:
    """Where the repository is cloned; its virtualenv (~300 MB) is removed after."""
    path = tmp_path / "chatbridge"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_fresh_clone_answers_after_the_readmes_first_command(clone: Path, tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    subprocess.run(
        ["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120
    )  # the committed HEAD, as a newcomer gets it
    home = tmp_path / "home"
    home.mkdir()
    env = _fresh_environment(home)
    # pip may keep its cache; everything else starts empty.
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    main_job, tests = quick_start()

    result = subprocess.run(
        ["bash", "-c", main_job],
        cwd=clone,
        env=env,
        input=f"{QUESTION}\n",
        capture_output=True,
        text=True,
        timeout=1100,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    banner, *answer = result.stdout.splitlines()
    assert banner.startswith("chatbridge chat · provider: debug"), result.stdout[:2000]
    # The debug provider answers with the prompt it got: the question is in it.
    assert "[user]" in answer
    assert QUESTION in answer
    assert "Traceback" not in result.stderr
    assert (clone / "data" / "chatbridge.db").is_file(), "the answer was not remembered"

    dry_run = subprocess.run(
        [*shlex.split(tests), "--dry-run"], cwd=clone, env=env,
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert ".venv/bin/python -m pytest" in dry_run
    assert "pip install" not in dry_run, "the test command would set up a second time"

    on_path = subprocess.run(
        ["bash", "-c", ". .venv/bin/activate && chatbridge --version"], cwd=clone, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert on_path.returncode == 0, on_path.stderr
    assert on_path.stdout.startswith("chatbridge ")
