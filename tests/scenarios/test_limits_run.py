"""Limits through `chatbridge run` over the fakes: Telegram + OpenAI, real SQLite.

A request is made only while its worst case fits; then one sentence names
the limit and its reset, and nothing reaches the model. Concurrent messages
cannot pass a limit together, admins can be exempt, /status shows what is
left going down, and /metrics counts refusals by limit kind.
"""

from __future__ import annotations

import csv
import io
import json
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.cli import free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE, BOB
from tests.support.run_config import run_config_text
from tests.support.running import chatbridge_run
from tests.support.sse import Reply

GROUPS = [-1001000 - i for i in range(5)]


def _config(
    telegram: FakeTelegram,
    openai: FakeOpenAI,
    port: int,
    *,
    limits: dict[str, Any],
    max_tokens: int,
    prices: dict[str, float] | None = None,
    **sections: Any,
) -> str:
    main: dict[str, Any] = {"api_key": "${OPENAI_API_KEY}", "max_tokens": max_tokens}
    if prices is not None:
        main["prices"] = prices
    return run_config_text(
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        allow=(ALICE, *GROUPS),
        bot={"language": "en", "timezone": "Europe/Berlin"},
        providers={"main": main},
        platforms={"telegram": {"edit_interval": "0.2s"}},
        access={"admins": [f"telegram:{BOB}"]},
        limits=limits,
        **sections,
    )


def _env(telegram: FakeTelegram) -> dict[str, str]:
    return {"TELEGRAM_BOT_TOKEN": telegram.token, "OPENAI_API_KEY": "sk-limits-1"}


async def _say(telegram: FakeTelegram, chat: int, user: int, text: str, **kw: object) -> str:
    """Send `text` and return the bot's next message in that chat."""
    before = len(telegram.bot_texts(chat))
    telegram.push_text(chat, user, text, **kw)  # type: ignore[arg-type]
    await telegram.wait_for(lambda: len(telegram.bot_texts(chat)) > before, within=30)
    return telegram.bot_texts(chat)[before]


def _left_today(status: str) -> int:
    (line,) = [x for x in status.splitlines() if x.startswith("left today: ")]
    return int(line.removeprefix("left today: ").removesuffix(" tokens"))


async def test_a_daily_limit_answers_while_the_worst_case_fits(tmp_path: Path) -> None:
    port = free_port()
    limits = {"default": {"tokens_per_day": 1100}, "admins_exempt": True}
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        config = _config(telegram, openai, port, limits=limits, max_tokens=900)
        (tmp_path / "chatbridge.yaml").write_text(config)
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            left = [_left_today(await _say(telegram, ALICE, ALICE, "/status"))]
            answers = 0
            for n in range(10):
                reply = await _say(telegram, ALICE, ALICE, f"question number {n}")
                if "limit" in reply:
                    refusal = reply
                    break
                answers += 1
                left.append(_left_today(await _say(telegram, ALICE, ALICE, "/status")))
            else:
                raise AssertionError("the daily limit never refused")
            requests = len(openai.requests)
            again = await _say(telegram, ALICE, ALICE, "one more, please")
            after = len(openai.requests)
            exempt = await _say(telegram, BOB, BOB, "I am the admin")
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/metrics") as response,
            ):
                metrics = await response.text()
    assert ran.code == 0, ran.stderr
    assert answers >= 1
    assert requests == answers, "a refused message reached the model"
    assert refusal == (
        "Sorry, that would go past your daily token limit, so I will not answer it; "
        "it resets at midnight (Europe/Berlin)."
    )
    assert again == refusal
    assert after == requests
    assert left[0] == 1100
    assert left == sorted(left, reverse=True), left
    assert left[-1] < left[0], left
    assert "limit" not in exempt
    assert len(openai.requests) == requests + 1, "the exempt admin was not answered"
    assert 'chatbridge_limit_refusals_total{kind="tokens_per_day"} 2.0' in metrics


async def test_five_simultaneous_messages_against_a_budget_for_two(tmp_path: Path) -> None:
    limits = {"default": {"tokens_per_day": 2300}}
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        # Each worst case is ~1060 tokens: two fit, and the slow answers keep
        # both holds in place while the other three are decided.
        openai.script(*[Reply(first_chunk_delay=1.5) for _ in range(5)])
        config = _config(telegram, openai, free_port(), limits=limits, max_tokens=1000)
        (tmp_path / "chatbridge.yaml").write_text(config)
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            for group in GROUPS:
                telegram.push_text(group, ALICE, "@bridge_bot hello", chat_type="supergroup")
            await telegram.wait_for(
                lambda: all(telegram.bot_texts(g) for g in GROUPS) and openai.streams.open == 0,
                within=40,
            )
            replies = [telegram.bot_texts(g)[-1] for g in GROUPS]
    assert ran.code == 0, ran.stderr
    assert len(openai.requests) == 2
    refused = [r for r in replies if "daily token limit" in r]
    assert len(refused) == 3, replies


async def test_past_messages_per_minute_one_notice_then_silence(tmp_path: Path) -> None:
    limits = {"default": {"messages_per_minute": 1}}
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        config = _config(telegram, openai, free_port(), limits=limits, max_tokens=100)
        (tmp_path / "chatbridge.yaml").write_text(config)
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            first = await _say(telegram, ALICE, ALICE, "one")
            notice = await _say(telegram, ALICE, ALICE, "two")
            # In order per chat: once /status is answered, "three" was decided.
            telegram.push_text(ALICE, ALICE, "three")
            status = await _say(telegram, ALICE, ALICE, "/status")
            transcript = telegram.bot_texts(ALICE)
    assert ran.code == 0, ran.stderr
    assert first == "Hello from the fake."
    assert notice == (
        "Please slow down: your limit of messages per minute (1) is reached; "
        "I will answer again in a minute."
    )
    assert status.startswith("Model:"), "the third message got more than silence"
    assert len(transcript) == 3
    assert len(openai.requests) == 1


async def test_usage_in_three_formats_matches_the_reported_usage_and_prices(
    tmp_path: Path,
) -> None:
    port = free_port()
    limits = {"default": {"tokens_per_day": 100000, "usd_per_day": 1.5}}
    used = {ALICE: [(1200, 300), (2500, 700)], BOB: [(40_000, 1_000)]}
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        prices = {"input_per_mtok": 0.15, "output_per_mtok": 0.6}
        config = _config(telegram, openai, port, limits=limits, max_tokens=2000, prices=prices)
        (tmp_path / "chatbridge.yaml").write_text(config)
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            for user, reports in used.items():
                for n, usage in enumerate(reports):
                    openai.script(Reply(usage=usage))
                    await _say(telegram, user, user, f"question {n}")
            status = await _say(telegram, ALICE, ALICE, "/status")
        assert ran.code == 0, ran.stderr
        env = {"TELEGRAM_BOT_TOKEN": "", "OPENAI_API_KEY": ""}  # no secrets needed
        shown = {
            fmt: await run_cli("usage", "--format", fmt, cwd=tmp_path, env=env)
            for fmt in ("json", "csv", "table")
        }
        one = await run_cli("usage", "--user", f"telegram:{BOB}", "--format", "json", cwd=tmp_path)
    for result in (*shown.values(), one):
        assert result.code == 0, result.stderr

    def cost(reports: list[tuple[int, int]]) -> float:
        return sum(i * 0.15 / 1e6 + o * 0.6 / 1e6 for i, o in reports)

    people = {p["id"]: p for p in json.loads(shown["json"].stdout)["people"]}
    assert set(people) == {f"telegram:{ALICE}", f"telegram:{BOB}"}
    for user, reports in used.items():
        person = people[f"telegram:{user}"]
        assert person["tokens_in"] == sum(i for i, _ in reports)
        assert person["tokens_out"] == sum(o for _, o in reports)
        assert person["requests"] == len(reports)
        assert person["refused"] == 0
        assert person["cost_usd"] == pytest.approx(cost(reports), abs=1e-8)
        assert person["left"]["usd_per_day"] == pytest.approx(1.5 - cost(reports), abs=1e-5)
    alice = people[f"telegram:{ALICE}"]
    assert alice["left"]["tokens_per_day"] == 100000 - 4700
    assert "left today: 95300 tokens, $1.50" in status
    # Bob is an admin, but admins_exempt is off: his limits apply too.
    assert people[f"telegram:{BOB}"]["left"]["tokens_per_day"] == 100000 - 41000
    rows = list(csv.reader(io.StringIO(shown["csv"].stdout)))
    assert rows[0] == ["kind", "id", "tokens_in", "tokens_out", "requests", "refused", "cost_usd"]
    assert rows[1:] == [
        ["person", f"telegram:{u}", str(sum(i for i, _ in r)), str(sum(o for _, o in r)),
         str(len(r)), "0", f"{cost(r):.6f}"]
        for u, r in sorted(used.items(), key=lambda item: f"telegram:{item[0]}")
    ]  # fmt: skip
    table = shown["table"].stdout.splitlines()
    assert table[0].split()[:2] == ["KIND", "ID"]
    assert any(f"telegram:{ALICE}" in line and " 3700 " in line for line in table)
    (bob,) = json.loads(one.stdout)["people"]
    assert bob["id"] == f"telegram:{BOB}"


async def test_sighup_applies_new_limits_to_the_next_message_and_keeps_what_was_spent(
    tmp_path: Path,
) -> None:
    def limits(tokens: int) -> dict[str, Any]:
        return {"default": {"tokens_per_day": tokens}}

    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(Reply(usage=(300, 40)))
        path = tmp_path / "chatbridge.yaml"
        port = free_port()
        path.write_text(_config(telegram, openai, port, limits=limits(100_000), max_tokens=500))
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            assert ran.process is not None
            await _say(telegram, ALICE, ALICE, "first question")
            assert _left_today(await _say(telegram, ALICE, ALICE, "/status")) == 100_000 - 340

            async def reload_to(tokens: int) -> int:
                """SIGHUP with `tokens` a day; what /status shows left once it applies."""
                before = _left_today(await _say(telegram, ALICE, ALICE, "/status"))
                path.write_text(
                    _config(telegram, openai, port, limits=limits(tokens), max_tokens=500)
                )
                assert ran.process is not None
                ran.process.send_signal(signal.SIGHUP)
                while True:  # until the reloaded limit shows (a condition, not a sleep)
                    left = _left_today(await _say(telegram, ALICE, ALICE, "/status"))
                    if left != before:
                        return left

            assert await reload_to(50_000) == 50_000 - 340  # what was spent stays spent
            answered = await _say(telegram, ALICE, ALICE, "second question")
            left = _left_today(await _say(telegram, ALICE, ALICE, "/status"))
            spent = 50_000 - left
            assert await reload_to(spent + 100) == 100  # the next worst case is > 500
            refused = await _say(telegram, ALICE, ALICE, "third question")
    assert ran.code == 0, ran.stderr
    assert "limit" not in answered
    assert refused.startswith("Sorry, that would go past your daily token limit")
    assert len(openai.requests) == 2


async def test_a_group_scope_pool_is_shared_by_everyone_there_and_nobody_else(
    tmp_path: Path,
) -> None:
    """A pool in one Telegram group: Alice's answer spends it, Bob (an admin,
    but admins_exempt is off) is refused with no model request; a user in another
    group and Alice's DM are not held by it; /status in the group shows what
    is left of the pool and `chatbridge usage` lists it under scopes."""
    pooled, other = GROUPS[0], GROUPS[1]
    carol = 31313131
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(Reply(usage=(700, 300)))
        config = _config(
            telegram,
            openai,
            free_port(),
            limits={"admins_exempt": False},
            max_tokens=900,
            scopes={f"telegram:{pooled}": {"limits": {"tokens_per_day": 1500}}},
        )
        (tmp_path / "chatbridge.yaml").write_text(config)
        async with chatbridge_run(tmp_path, _env(telegram)) as ran:
            group = {"chat_type": "supergroup"}
            full = _left_today(await _say(telegram, pooled, ALICE, "/status", **group))
            first = await _say(telegram, pooled, ALICE, "@bridge_bot hello", **group)
            left = _left_today(await _say(telegram, pooled, ALICE, "/status", **group))
            requests = len(openai.requests)
            refused = await _say(telegram, pooled, BOB, "@bridge_bot and me?", **group)
            after = len(openai.requests)
            elsewhere = await _say(telegram, other, carol, "@bridge_bot hi there", **group)
            private = await _say(telegram, ALICE, ALICE, "hello in private")
            private_status = await _say(telegram, ALICE, ALICE, "/status")
        assert ran.code == 0, ran.stderr
        usage = await run_cli("usage", "--format", "json", cwd=tmp_path)
    assert usage.code == 0, usage.stderr
    assert (full, left) == (1500, 500)
    assert "limit" not in first
    assert requests == 1
    assert refused == (
        "Sorry, that would go past this chat's shared daily token limit, so I will not "
        "answer it; it resets at midnight (Europe/Berlin)."
    )
    assert after == requests, "a refused message reached the model"
    assert "limit" not in elsewhere
    assert "limit" not in private
    assert "left today" not in private_status  # Alice alone has no limits
    assert len(openai.requests) == 3
    (pool,) = json.loads(usage.stdout)["scopes"]
    assert pool["id"] == f"telegram:{pooled}"
    assert (pool["tokens_in"], pool["tokens_out"], pool["requests"], pool["refused"]) == (
        700,
        300,
        1,
        1,
    )
    assert pool["left"] == {"tokens_per_day": 500}
