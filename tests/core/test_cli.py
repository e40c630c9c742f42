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
