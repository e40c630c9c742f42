"""The command line refuses what would act on nobody or crash-loop, in one line.

`--user` that is neither `platform:id` nor an identity name; a store directory
the process cannot write (systemd's `ProtectSystem=strict` makes /etc
read-only, where a relative `memory.path` next to the config lands); and
`chatbridge chat | head -1`, whose reader leaves early, ends quietly.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from chatbridge.core.app.cli import main
from tests.support.cli import CHATBRIDGE, clean_env

BAD_USERS = {
    "a bare word": ("foo", "neither a platform:id"),
    "a username for telegram": ("telegram:alice", "telegram IDs are numbers"),
    "an unknown platform": ("whatsapp:123", "unknown platform 'whatsapp'"),
}
COMMANDS = (["chat"], ["memory", "show"], ["memory", "export"], ["memory", "forget"])


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("case", sorted(BAD_USERS))
def test_a_user_that_names_nobody_is_exit_2_with_one_line(
    command: list[str],
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user, expected = BAD_USERS[case]
    config = tmp_path / "chatbridge.yaml"
    config.write_text("identities:\n  alice: [telegram:579304651]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("Hallo\n"))
    assert main([*command, "--user", user, "--config", str(config)], environ={}) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"chatbridge: --user {user}: "), line
    assert expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chatbridge.yaml"], "a store was made"


@pytest.mark.parametrize("user", ["alice", "telegram:579304651", "console:local", "local"])
def test_an_identity_name_or_a_platform_id_is_taken(
    user: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("identities:\n  alice: [telegram:579304651]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("Hallo\n"))
    assert main(["chat", "--quiet", "--user", user], environ={}) == 0
    assert "Hallo" in capsys.readouterr().out


def test_the_chat_ends_quietly_when_its_reader_leaves(tmp_path: Path) -> None:
    """`chatbridge chat | head -1`: the first line is read, then the pipe closes."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [*CHATBRIDGE, "chat"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        banner = reader.readline()  # what `head -1` prints; then it exits
    assert process.stdin is not None
    assert process.stderr is not None
    process.stdin.write(b"eins\nzwei\ndrei\n")
    process.stdin.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert banner.startswith(b"chatbridge chat")
    assert err == "", err


# --- a store directory that cannot be written -------------------------------------------


def _read_only_prefix(directory: Path) -> list[str]:
    """A command prefix under which `directory` is read-only for the child.

    Root ignores file modes, so as root the child gets a private mount
    namespace with `directory` bind-mounted read-only (what systemd's
    `ProtectSystem=strict` does to /etc); otherwise a mode does it.
    """
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    prefix = [unshare or "unshare", "--mount", "sh", "-c", script, "sh", str(directory)]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
    if unshare is None or probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.decode().strip()}")
    return prefix


def _run_read_only(directory: Path, *args: str, env: dict[str, str] | None = None) -> tuple:
    prefix = _read_only_prefix(directory)
    try:
        result = subprocess.run(
            [*prefix, *CHATBRIDGE, *args],
            cwd=directory.parent,
            env=clean_env(env),
            input=b"Hallo\n",
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        directory.chmod(0o755)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


@pytest.mark.parametrize("made_before", [False, True], ids=["no store yet", "store made earlier"])
def test_a_read_only_store_directory_is_one_sentence_naming_it_and_the_setting(
    made_before: bool, tmp_path: Path
) -> None:
    etc = tmp_path / "etc-chatbridge"
    etc.mkdir()
    config = etc / "chatbridge.yaml"
    # As in the example config: a relative path, so next to the config file.
    config.write_text("memory:\n  path: data/chatbridge.db\n")
    if made_before:  # e.g. `chatbridge chat` tried once as root before the service started
        first = subprocess.run(
            [*CHATBRIDGE, "chat", "--quiet", "--config", str(config)], cwd=tmp_path,
            env=clean_env(), input=b"hi\n", capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
    code, _, err = _run_read_only(etc, "chat", "--config", str(config))
    assert code == 2, err
    (line,) = err.splitlines()
    blocked = etc / "data" if made_before else etc
    assert f"{blocked} is on a read-only file system" in line or (
        f"{blocked} is not writable" in line
    ), line
    assert "set memory.path" in line
    assert "readonly database" not in line
    assert (etc / "data").exists() == made_before


def test_run_refuses_a_read_only_store_directory_before_connecting(tmp_path: Path) -> None:
    etc = tmp_path / "etc-chatbridge"
    etc.mkdir()
    config = etc / "chatbridge.yaml"
    config.write_text(
        "memory:\n  path: data/chatbridge.db\n"
        "platforms:\n  telegram:\n    enabled: true\n    base_url: http://127.0.0.1:9/bot\n"
    )
    env = {"TELEGRAM_BOT_TOKEN": "123:abc", "OPENAI_API_KEY": "sk-test-read-only"}
    code, _, err = _run_read_only(etc, "run", "--config", str(config), env=env)
    assert code == 2, err
    (line,) = err.splitlines()
    assert f"the store {etc / 'data' / 'chatbridge.db'} cannot be written" in line
    assert "memory.path" in line
