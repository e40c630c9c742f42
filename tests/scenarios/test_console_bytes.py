"""Issue 17.6: `chatbridge chat` takes stdin bytes that are not valid UTF-8.

Such bytes become U+FFFD in every stdin mode Python offers (strict, the
default, surrogateescape, a C locale); every line is answered and the
process exits 0 at EOF. The debug provider echoes the prompt, so each
answer shows what the bot read.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.cli import CHATBRIDGE, clean_env

LINES = b"erste Zeile\n\xff\xfe kaputt \xc3\n\xe2\x82 halb\ndritte Zeile\n"
MODES = {
    "default": {},
    "utf-8:strict": {"PYTHONIOENCODING": "utf-8:strict"},
    "utf-8:surrogateescape": {"PYTHONIOENCODING": "utf-8:surrogateescape"},
    "utf-8:replace": {"PYTHONIOENCODING": "utf-8:replace"},
    "utf8-mode": {"PYTHONUTF8": "1"},
    "c-locale": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"},
    "ascii:strict": {"PYTHONIOENCODING": "ascii:strict"},
}


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_every_line_is_answered_and_bad_bytes_become_replacement_characters(
    tmp_path: Path, mode: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "chat", "--quiet", cwd=tmp_path, env=clean_env(MODES[mode]),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(LINES), 60)  # a hang guard only
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    # The debug provider's answer ends with the message it answered.
    assert stdout.endswith("[user]\ndritte Zeile\n\n"), stdout
    assert "[user]\nerste Zeile\n\n" in stdout
    assert "schiefgegangen" not in stdout  # no internal error on the way
    if mode in ("ascii:strict", "c-locale"):  # an ASCII terminal shows "?" for U+FFFD
        assert "[user]\n?? kaputt ?\n\n" in stdout
        assert "[user]\n? halb\n\n" in stdout
    else:
        assert "[user]\n\ufffd\ufffd kaputt \ufffd\n\n" in stdout
        assert "[user]\n\ufffd halb\n\n" in stdout
