"""The `chatbridge` command line: exit codes, one-sentence errors, memory commands."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import pytest

from chatbridge.core.app.cli import main

BROKEN_CONFIGS = {
    "yaml syntax": "engine:\n  session_ttl: [30m\n",
    "typo'd key": "memory:\n  max_entires: 20\n",
    "typo'd section": "engin:\n  session_ttl: 30m\n",
    "bad duration": "engine:\n  session_ttl: half an hour\n",
    "negative duration": "memory:\n  max_age: -5m\n",
    "wrong type": "memory:\n  max_entries: many\n",
    "bad enum": "memory:\n  backend: mongodb\n",
    "bad language": "bot:\n  language: fr\n",
    "unknown provider type": "providers:\n  main:\n    type: gemini\n    model: x\n",
    "missing env var": "providers:\n  main:\n    type: openai\n    model: m\n"
    "    api_key: ${NOT_SET_ANYWHERE}\n",
    "default names a missing provider": "providers:\n  default: mian\n  main:\n    type: debug\n",
    "telegram without token": "platforms:\n  telegram:\n    enabled: true\n",
    "bad access id": "access:\n  allow: [579304651]\n",
    "top level is a list": "- engine\n- memory\n",
    "port out of range": "server:\n  port: 70000\n",
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv, environ={})
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(BROKEN_CONFIGS))
def test_config_check_reports_each_broken_config_with_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(BROKEN_CONFIGS[name])
    code, out, err = _run(["config", "check", "--config", str(path)], capsys)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines
    for line in lines:
        assert re.match(rf"^{re.escape(str(path))}:\d+: (?:[\w.\[\]]+: )?\S", line), line


def test_config_check_ok_prints_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text("engine:\n  session_ttl: 45m\n")
    code, out, err = _run(["config", "check", "--config", str(path)], capsys)
    assert code == 0, err
    assert len(out.strip().splitlines()) == 1
    assert out.startswith(f"{path}: ok")


def test_a_missing_config_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["config", "check", "--config", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2
    assert "nope.yaml" in err
    assert "Traceback" not in err


def _chat(tmp_path: Path, lines: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    return main(["chat", "--quiet", *args], environ={})


def test_memory_show_export_and_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _chat(tmp_path, "Check wo das Chemitek-Paket bleibt\n", monkeypatch) == 0
    capsys.readouterr()

    code, out, _ = _run(["memory", "show", "--user", "console:local"], capsys)
    assert code == 0
    entries = json.loads(out)
    assert isinstance(entries, list)
    assert len(entries) == 1
    assert entries[0]["user_message"] == "Check wo das Chemitek-Paket bleibt"
    assert {"timestamp", "assistant_summary", "session_name", "workdir"} <= set(entries[0])

    code, exported, _ = _run(["memory", "export", "--user", "console:local"], capsys)
    assert code == 0
    assert json.loads(exported) == entries

    code, out, _ = _run(["memory", "forget", "--user", "console:local"], capsys)
    assert code == 0
    assert "console:local" in out
    for file in (tmp_path / "data").iterdir():
        assert b"Chemitek" not in file.read_bytes(), file
    assert json.loads(_run(["memory", "show", "--user", "console:local"], capsys)[1]) == []


def test_chat_as_another_user_shares_that_users_ring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _chat(tmp_path, "Hallo\n", monkeypatch, "--user", "telegram:579304651") == 0
    capsys.readouterr()
    code, out, _ = _run(["memory", "show", "--user", "telegram:579304651"], capsys)
    assert code == 0
    assert [e["user_message"] for e in json.loads(out)] == ["Hallo"]


def test_a_corrupt_store_stops_start_up_and_is_left_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "data" / "chatbridge.db"
    store.parent.mkdir()
    store.write_bytes(b"this is not a database, it is a shopping list\n" * 50)
    before = hashlib.sha256(store.read_bytes()).hexdigest()

    code = _chat(tmp_path, "Hallo\n", monkeypatch)
    out, err = capsys.readouterr()

    assert code == 1
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "data/chatbridge.db" in err
    assert "Traceback" not in err
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["chatbridge.db"]


def test_a_corrupt_json_store_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("memory:\n  backend: json\n  path: memory.json\n")
    store = tmp_path / "memory.json"
    store.write_text('[{"timestamp": 1743854580.0, "user_message": "Chemi')
    before = store.read_bytes()
    code = _chat(tmp_path, "Hallo\n", monkeypatch)
    _, err = capsys.readouterr()
    assert code == 1
    assert "memory.json" in err
    assert store.read_bytes() == before


def test_chat_with_the_json_backend_writes_the_seed_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("memory:\n  backend: json\n  path: memory.json\n")
    assert _chat(tmp_path, "Check wo das Chemitek-Paket bleibt\n", monkeypatch) == 0
    entries = json.loads((tmp_path / "memory.json").read_text())
    assert isinstance(entries, list)
    assert entries[0]["user_message"] == "Check wo das Chemitek-Paket bleibt"
    assert set(entries[0]) >= {
        "timestamp",
        "user_message",
        "assistant_summary",
        "session_name",
        "workdir",
    }


@pytest.mark.parametrize(
    "url",
    ["redis://:hunter2secret@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0?password=hunter2secret"],
)
def test_config_check_never_prints_a_redis_password(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(f'memory:\n  backend: redis\n  url: "{url}"\n')
    code, out, err = _run(["config", "check", "--config", str(path)], capsys)
    assert code == 0, err
    assert "hunter2secret" not in out + err
    assert "***" in out


def test_an_unparsable_redis_url_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text('memory:\n  backend: redis\n  url: "redis://:pw@host:abc/0"\n')
    code, _, err = _run(["config", "check", "--config", str(path)], capsys)
    assert code == 2
    assert "memory.url" in err
    assert "Traceback" not in err


def test_forget_reaches_data_from_before_the_identity_was_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _chat(tmp_path, "Alte Nachricht\n", monkeypatch, "--user", "telegram:579304651") == 0
    (tmp_path / "chatbridge.yaml").write_text(
        "identities:\n  alice: [telegram:579304651, slack:U0123]\n"
    )
    assert _chat(tmp_path, "Neue Nachricht\n", monkeypatch, "--user", "alice") == 0
    capsys.readouterr()
    code, out, _ = _run(["memory", "forget", "--user", "alice"], capsys)
    assert code == 0
    assert "telegram:579304651" in out
    for file in (tmp_path / "data").iterdir():
        content = file.read_bytes()
        assert b"Alte Nachricht" not in content, file
        assert b"Neue Nachricht" not in content, file


# --- memory commands: only the store section, never a new store, honest forget ---------------

SECRETS_UNSET = """
memory:
  path: data/chatbridge.db
platforms:
  telegram:
    enabled: true
    token: ${TELEGRAM_BOT_TOKEN}
providers:
  main:
    type: openai
    model: m
    api_key: ${OPENAI_API_KEY}
"""


def test_memory_commands_need_no_platform_or_provider_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _chat(tmp_path, "Hallo\n", monkeypatch) == 0
    (tmp_path / "chatbridge.yaml").write_text(SECRETS_UNSET)
    capsys.readouterr()
    code, _, err = _run(["config", "check"], capsys)
    assert code == 2
    assert "TELEGRAM_BOT_TOKEN" in err
    code, out, err = _run(["memory", "show", "--user", "console:local"], capsys)
    assert code == 0, err
    assert [e["user_message"] for e in json.loads(out)] == ["Hallo"]
    code, out, err = _run(["memory", "forget", "--user", "console:local"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("erased 1 memory entry of console:local")


def test_memory_commands_still_reject_unknown_top_level_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chatbridge.yaml").write_text("memroy:\n  path: x.db\n")
    code, _, err = _run(["memory", "show", "--user", "console:local"], capsys)
    assert code == 2
    assert "memroy: unknown key; did you mean 'memory'?" in err


@pytest.mark.parametrize("backend", ["sqlite", "json"])
@pytest.mark.parametrize("action", ["show", "export", "forget"])
def test_memory_commands_never_create_a_store(
    backend: str,
    action: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chatbridge.yaml").write_text(f"memory:\n  backend: {backend}\n  path: st/m.db\n")
    code, out, err = _run(["memory", action, "--user", "console:local"], capsys)
    assert code == 1
    assert out == ""
    assert err == f"chatbridge: no store at {tmp_path / 'st' / 'm.db'}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chatbridge.yaml"]


def test_memory_commands_find_the_store_beside_the_config_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conf, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    conf.mkdir()
    elsewhere.mkdir()
    config = conf / "chatbridge.yaml"
    config.write_text("memory:\n  path: state/bot.db\n")
    assert _chat(conf, "Hallo\n", monkeypatch) == 0
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    who = ["--user", "console:local", "--config", str(config)]
    code, out, err = _run(["memory", "show", *who], capsys)
    assert code == 0, err
    assert len(json.loads(out)) == 1
    code, out, _ = _run(["memory", "forget", *who], capsys)
    assert out.startswith("erased 1 memory entry")
    assert list(elsewhere.iterdir()) == []
    code, out, _ = _run(["memory", "forget", *who], capsys)
    assert code == 0
    assert out == "nothing stored for console:local (console:local); nothing erased\n"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


UNSAFE = "Hallo \x1b[2J\x1b]0;pwned\x07 \x9b31m \u202etxt.exe \u200b\ud800 Ende"


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_stored_escape_sequences_never_reach_stdout_raw(
    terminal: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "chatbridge.yaml").write_text("memory:\n  backend: json\n  path: memory.json\n")
    entry = {
        "timestamp": 1743854580.0,
        "user_message": UNSAFE,
        "assistant_summary": UNSAFE,
        "session_name": "console:local::local",
        "workdir": "",
        "user": "console:local",
        "scope": "private",
    }
    (tmp_path / "memory.json").write_text(json.dumps([entry]))
    monkeypatch.chdir(tmp_path)
    for action in ("show", "export"):
        stdout = _Terminal() if terminal else io.StringIO()
        monkeypatch.setattr("sys.stdout", stdout)
        assert main(["memory", action, "--user", "console:local"], environ={}) == 0
        out = stdout.getvalue()
        assert out.isascii() or all(ch.isprintable() or ch == "\n" for ch in out)
        for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\u200b", "\ud800"):
            assert raw not in out
        assert "\\u001b[2J" in out
        assert json.loads(out)[0]["user_message"] == UNSAFE  # still valid JSON, same text


# --- the example config, copied as its header says, on a machine with no keys ---------------

EXAMPLE = Path(__file__).parents[2] / "config" / "chatbridge.example.yaml"


def test_the_example_config_works_with_no_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chatbridge.yaml").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["config", "check"], capsys)
    assert code == 0, err
    assert out.startswith(f"{tmp_path / 'chatbridge.yaml'}: ok")
    assert "platforms none" in out
    monkeypatch.setattr("sys.stdin", io.StringIO("Hallo\n"))
    assert main(["chat"], environ={}) == 0
    out, err = capsys.readouterr()
    assert "provider: debug" in out.splitlines()[0]
    assert "Hallo" in out
    assert (tmp_path / "data" / "chatbridge.db").is_file()


def test_the_example_config_with_telegram_on_names_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = EXAMPLE.read_text().replace(
        "    enabled: false          # connect to Telegram", "    enabled: true"
    )
    (tmp_path / "chatbridge.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    for argv in (["config", "check"], ["chat"]):
        code, out, err = _run(argv, capsys)
        assert code == 2
        assert out == ""
        (line,) = err.strip().splitlines()
        assert line.endswith(
            "platforms.telegram.token: environment variable TELEGRAM_BOT_TOKEN is not set"
        )


def test_an_api_key_from_a_file_named_by_the_environment_is_used_and_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "openai_key"
    key_file.write_text("sk-from-a-file-123456\n")
    env = {"OPENAI_API_KEY_FILE": str(key_file)}
    (tmp_path / "c.yaml").write_text("bot: {language: en}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(""))
        assert main(["chat", "--config", str(tmp_path / "c.yaml")], environ=env) == 0
    out = capsys.readouterr()
    assert "openai gpt-5.4-mini (from OPENAI_API_KEY)" in out.out
    assert "sk-from-a-file-123456" not in out.out + out.err


def test_both_an_api_key_and_its_file_is_one_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "openai_key"
    key_file.write_text("sk-other-key-987654\n")
    (tmp_path / "c.yaml").write_text("bot: {language: en}\n")
    env = {"OPENAI_API_KEY": "sk-inline-key-555555", "OPENAI_API_KEY_FILE": str(key_file)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(""))
        assert main(["chat", "--config", str(tmp_path / "c.yaml")], environ=env) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY and OPENAI_API_KEY_FILE are both set" in err
    assert "Traceback" not in err
    assert "sk-inline-key-555555" not in err
    assert "sk-other-key-987654" not in err
