"""`config check` and every CLI error path: a token in the config never reaches the output.

Each config puts a secret next to (or in place of) a mistake, so the message
about the mistake is the one that could quote it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.core.app.cli import main

TOKEN = "123456:AAHdontLeakMe-42"
KEY = "sk-proj-dontLeakMeEither"
ENV = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": KEY}
TG = "platforms:\n  telegram:\n"

CONFIGS = {
    "wrong type beside the token": TG + f"    enabled: maybe\n    token: {TOKEN}\n",
    "unknown key beside the token": TG + f"    tokn: {TOKEN}\n    enabeld: true\n",
    "token under a typo'd key": TG + f"    enabled: true\n    tokne: {TOKEN}\n",
    "token as a list": TG + f"    enabled: true\n    token: [{TOKEN}]\n",
    "token instead of the section": f"platforms:\n  telegram: {TOKEN}\n",
    "token as the whole file": f"{TOKEN}\n",
    "token with a duplicate key": TG + f"    token: {TOKEN}\n    token: {TOKEN}\n",
    "bad webhook secret": "platforms:\n  telegram:\n    enabled: true\n    mode: webhook\n"
    f"    webhook_url: https://x.example/h\n    webhook_secret: '{TOKEN} !'\n",
    "api key beside a bad model type": f"providers:\n  main:\n    type: openai\n    model: [1]\n"
    f"    api_key: {KEY}\n",
    "api key from env beside a bad timeout": "providers:\n  main:\n    type: openai\n    model: m\n"
    "    api_key: ${OPENAI_API_KEY}\n    timeout: soon\n",
    "token from env beside an unknown key": "platforms:\n  telegram:\n    enabled: true\n"
    "    token: ${TELEGRAM_BOT_TOKEN}\n    moed: webhook\n",
    "token and token_file": TG + f"    token: {TOKEN}\n    token_file: /x\n",
    "yaml syntax error after the token": TG + f"    token: {TOKEN}\n  - [\n",
    "secret in a redis url beside a bad backend": "memory:\n  backend: mongodb\n"
    f"  url: redis://:{KEY}@127.0.0.1:6379/0\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("command", [["config", "check"], ["chat"], ["memory", "show"]])
def test_no_error_path_echoes_a_secret(
    name: str,
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "chatbridge.yaml"
    path.write_text(CONFIGS[name])
    monkeypatch.chdir(tmp_path)
    argv = [*command, "--config", str(path)]
    if command[0] == "memory":
        argv += ["--user", "console:local"]
    code = main(argv, environ=ENV)
    out, err = capsys.readouterr()
    assert code != 0 or command[0] == "memory"  # memory reads only its own sections
    for secret in (TOKEN, KEY, "AAHdontLeakMe", "dontLeakMeEither"):
        assert secret not in out + err, (name, out + err)


def test_a_secret_file_that_is_not_utf8_is_not_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "tg"
    secret.write_bytes(TOKEN.encode() + b"\xff")
    path = tmp_path / "chatbridge.yaml"
    path.write_text(TG + f"    enabled: true\n    token_file: {secret}\n")
    assert main(["config", "check", "--config", str(path)], environ={}) == 2
    out, err = capsys.readouterr()
    assert str(secret) in err
    assert "AAHdontLeakMe" not in out + err
