"""deploy/README.md's instructions, run as written as far as this machine allows.

The command blocks are read from the README itself, so the document and what
is run cannot drift. This machine has no systemd as PID 1 and no Docker
daemon: `systemctl`, `journalctl` and `docker` lines are recorded or skipped
(and the files they would use are checked by `test_deploy_files.py` with
`systemd-analyze` and a YAML parse); everything else runs for real:

* the compose block in a copy of the repository, up to its `config check`;
* the systemd block whole (virtualenv, `pip install '.[all]'`, every `install`, the
  `config check` as the unit will see the config), as root in a private mount
  namespace whose `/etc` and `/opt` are overlays on throw-away folders, so
  nothing of this machine changes. The edit step (`sudoedit`, `$EDITOR`) is a
  stand-in editor that writes test values.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO

DEPLOY = REPO / "deploy"
README = DEPLOY / "README.md"
NOT_HERE = {
    "systemctl": "no systemd as PID 1 here",
    "journalctl": "no systemd journal here",
    "docker": "no Docker daemon here",
}
RUN_HERE = {
    "python3", "install", "sudoedit", "sh", "cp", "printf", "chmod", "chatbridge",
    "/opt/chatbridge/venv/bin/pip", '"${EDITOR:-vi}"', "(set",
}  # fmt: skip
TOKEN = "123456:TEST-token-for-the-deploy-steps"
API_KEY = "sk-test-deploy-steps-0000"


def commands(section: str) -> list[str]:
    """The lines of the ```sh blocks under `## section`, comments kept."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"deploy/README.md has no section {section!r}"
    blocks = re.findall(r"^```sh\n(.*?)^```", match.group(1), re.S | re.M)
    assert blocks, f"no sh block under {section!r}"
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def program(line: str) -> str:
    words = line.split()
    return words[1] if words[0] == "sudo" else words[0]


def test_the_unit_and_the_main_readme_cite_this_file() -> None:
    unit = (DEPLOY / "chatbridge.service").read_text(encoding="utf-8")
    assert "deploy/README.md" in unit.split("[Unit]")[0]
    (documentation,) = re.findall(r"^Documentation=file://(\S+)$", unit, re.M)
    installed = [line for line in commands("systemd") if "deploy/README.md" in line]
    assert installed, "the systemd steps do not install the README the unit cites"
    assert installed[0].split()[-1] == documentation
    assert "deploy/README.md" in (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("section", ["systemd", "Docker", "Docker Compose: bot + Redis"])
def test_every_instruction_is_run_here_or_named_as_impossible_here(section: str) -> None:
    for line in commands(section):
        name = program(line)
        assert name in RUN_HERE or name in NOT_HERE, (
            f"{line!r}: new instruction; run it in this test or say why it cannot run here"
        )


def _stand_in_editor(tmp_path: Path) -> Path:
    """Fills in the secrets file as the admin would."""
    editor = tmp_path / "bin" / "edit-secrets"
    editor.parent.mkdir(exist_ok=True)
    editor.write_text(
        "#!/bin/sh\n"
        f"sed -i 's/^TELEGRAM_BOT_TOKEN=$/TELEGRAM_BOT_TOKEN={TOKEN}/; "
        f's/^OPENAI_API_KEY=$/OPENAI_API_KEY={API_KEY}/\' "$1"\n'
    )
    editor.chmod(0o755)
    return editor


def _copy_of_the_repository(tmp_path: Path) -> Path:
    """The files git would commit, as they are in this work tree."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    copy = tmp_path / "repo"
    for name in filter(None, files.split("\0")):
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    return copy


def test_the_compose_steps_run_on_the_host_up_to_docker(tmp_path: Path) -> None:
    repo = _copy_of_the_repository(tmp_path)
    lines = commands("Docker Compose: bot + Redis")
    runnable = [line for line in lines if program(line) not in NOT_HERE]
    assert [program(line) for line in lines if line not in runnable] == ["docker"]
    # `chatbridge` on PATH, as the main README tells a user to arrange.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATBRIDGE_")}
    env |= {"PATH": path, "EDITOR": str(_stand_in_editor(tmp_path)), "OPENAI_API_KEY": API_KEY}
    script = "set -eu\n" + "\n".join(runnable) + "\n"
    result = subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = result.stdout.splitlines()
    config = repo / "deploy" / "chatbridge.compose.yaml"
    assert summary.startswith(f"{config}: ok: providers main (openai"), summary
    assert "platforms telegram" in summary
    secret = repo / "deploy" / "secrets" / "openai_api_key"
    assert secret.read_text() == API_KEY
    assert stat.S_IMODE(secret.stat().st_mode) == 0o444
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert f"TELEGRAM_BOT_TOKEN={TOKEN}" in (repo / "deploy" / "chatbridge.env").read_text()
    assert TOKEN not in result.stdout + result.stderr
    assert API_KEY not in result.stdout + result.stderr


def _mount_namespace_or_skip() -> str:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("the systemd steps write /etc and /opt: run only as root, in a namespace")
    probe = subprocess.run(
        [unshare, "--mount", "true"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()}")
    return unshare


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, emptied after the test: the overlays hold a whole virtualenv."""
    yield tmp_path
    for child in tmp_path.iterdir():
        shutil.rmtree(child, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_systemd_steps_run_in_a_private_mount_namespace(scratch: Path) -> None:
    tmp_path = scratch
    unshare = _mount_namespace_or_skip()
    repo = _copy_of_the_repository(tmp_path)
    shims = tmp_path / "shims"
    shims.mkdir()
    recorded = tmp_path / "not-run.log"
    (shims / "sudo").write_text('#!/bin/sh\nexec "$@"\n')  # already root
    (shims / "sudoedit").write_text(f'#!/bin/sh\nexec "{_stand_in_editor(tmp_path)}" "$1"\n')
    for name in ("systemctl", "journalctl"):  # NOT_HERE: recorded, not run
        (shims / name).write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> "{recorded}"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    overlays = []
    for top in ("etc", "opt"):
        upper, work = tmp_path / f"{top}-upper", tmp_path / f"{top}-work"
        upper.mkdir()
        work.mkdir()
        options = f"lowerdir=/{top},upperdir={upper},workdir={work}"
        overlays.append(f"mount -t overlay overlay -o {shlex.quote(options)} /{top}")
    steps = commands("systemd")
    script = "\n".join(["set -eu", *overlays, f"cd {shlex.quote(str(repo))}", *steps]) + "\n"
    # Outside the dev virtualenv, as on a fresh host.
    path = os.pathsep.join(
        [str(shims)]
        + [
            p
            for p in os.environ["PATH"].split(os.pathsep)
            if Path(sys.executable).parent != Path(p)
        ]
    )
    # No PYTHONPATH: pip installs from the package index as on a fresh host,
    # outside the tests' network guard (the one exception, said in README).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHATBRIDGE_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env["PATH"] = path
    result = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "bash", "-c", script],
        env=env, capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]

    etc, opt = tmp_path / "etc-upper", tmp_path / "opt-upper"
    summaries = [line for line in result.stdout.splitlines() if ": ok: " in line]
    assert summaries, output[-4000:]
    assert summaries[-1].startswith("/etc/chatbridge/chatbridge.yaml: ok: providers main (openai")
    assert "memory sqlite /var/lib/chatbridge/chatbridge.db" in summaries[-1]
    assert (etc / "systemd/system/chatbridge.service").read_bytes() == (
        DEPLOY / "chatbridge.service"
    ).read_bytes()
    env_file = etc / "chatbridge" / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert f"TELEGRAM_BOT_TOKEN={TOKEN}" in env_file.read_text()
    unit = (DEPLOY / "chatbridge.service").read_text(encoding="utf-8")
    (exec_start,) = re.findall(r"^ExecStart=(.+)$", unit, re.M)
    binary, *args = shlex.split(exec_start)
    assert (opt / binary.removeprefix("/opt/")).is_file(), f"the steps install no {binary}"
    config = args[args.index("--config") + 1]
    assert (etc / config.removeprefix("/etc/")).is_file(), f"the steps install no {config}"
    (documentation,) = re.findall(r"^Documentation=file://(\S+)$", unit, re.M)
    assert (opt / documentation.removeprefix("/opt/")).is_file()
    assert recorded.read_text().splitlines() == [
        "systemctl daemon-reload",
        "systemctl enable --now chatbridge",
        "journalctl -u chatbridge -f",
    ]
    assert not Path("/etc/chatbridge").exists(), "the namespace leaked into this machine"
    assert TOKEN not in output


@pytest.mark.parametrize(
    ("path", "section"),
    [
        ("compose.yaml", "Docker Compose: bot + Redis"),
        ("chatbridge.compose.yaml", "Docker Compose: bot + Redis"),
        ("chatbridge.systemd.yaml", "systemd"),
    ],
)
def test_the_check_a_file_tells_you_to_run_is_the_one_run_here(path: str, section: str) -> None:
    """Each deploy file's header names its `config check` line: it must be the
    README's, which the tests above run."""
    header = [
        line.lstrip("#").strip()
        for line in (DEPLOY / path).read_text(encoding="utf-8").splitlines()
        if line.startswith("#") and "config check" in line
    ]
    checks = [line for line in commands(section) if "config check" in line]
    assert header, f"{path} does not say how to check its config"
    assert header == checks, f"{path} says {header}, deploy/README.md runs {checks}"
