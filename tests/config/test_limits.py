"""The `limits:` section and provider `prices`: values, key-by-key overrides,
and every mistake as one `FILE:LINE: key: message` line."""

from __future__ import annotations

from pathlib import Path

from tests.config._helpers import load_error, load_ok, render


def test_a_people_entry_overrides_default_key_by_key(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        identities:
          alice: [telegram:1]
        limits:
          default: {tokens_per_day: 100, messages_per_minute: 3}
          people:
            alice: {tokens_per_day: 1000}
            "telegram:42": {tokens_per_day: 0}
          admins_exempt: true
        """,
    )
    alice = cfg.limits.people["alice"].over(cfg.limits.default)
    assert (alice.tokens_per_day, alice.messages_per_minute, alice.usd_per_day) == (1000, 3, None)
    assert cfg.limits.people["telegram:42"].tokens_per_day == 0
    assert cfg.limits.admins_exempt


def test_limit_mistakes_are_one_line_each(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        """
        providers:
          main: {type: debug}
        limits:
          default: {tokens_per_day: -1, usd_per_day: 1}
          people:
            bob: {tokens_per_dya: 4}
            "telegram:abc": {tokens_per_day: 1}
        """,
    )
    lines = render(error)
    assert (
        "FILE:5: limits.default.tokens_per_day: Input should be greater than or equal to 0 (got -1)"
        in lines
    )
    assert (
        "FILE:7: limits.people.bob.tokens_per_dya: unknown key; did you mean 'tokens_per_day'?"
        in lines
    )
    assert any(line.startswith("FILE:8: limits.people") and "numbers" in line for line in lines)


def test_usd_limits_need_prices_on_every_provider(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        """
        providers:
          default: main
          fallback: [backup]
          main: {type: debug, prices: {input_per_mtok: 0.15, output_per_mtok: 0.6}}
          backup: {type: debug}
        identities:
          alice: [telegram:1]
        limits:
          people:
            alice: {usd_per_month: 5}
            carol: {tokens_per_day: 1}
        """,
    )
    assert render(error) == [
        "FILE:11: limits.people.alice.usd_per_month: needs prices on every provider; "
        "providers.backup has none",
        "FILE:12: limits.people.carol: no identity named 'carol'",
    ]


def test_a_scope_pool_is_one_set_of_limit_keys(tmp_path: Path) -> None:
    cfg = load_ok(
        tmp_path,
        """
        scopes:
          "telegram:-100123":
            limits: {tokens_per_day: 500000, messages_per_minute: 20}
          discord:guild:42:
            language: en
        """,
    )
    pool = cfg.scopes["telegram:-100123"].limits
    assert pool is not None
    assert (pool.tokens_per_day, pool.messages_per_minute, pool.usd_per_day) == (500000, 20, None)
    assert cfg.scopes["discord:guild:42"].limits is None
    error = load_error(
        tmp_path,
        """
        providers:
          main: {type: debug}
        scopes:
          telegram:
            language: en
          "telegram:-100123":
            limits:
              tokens_per_dya: 5
              usd_per_day: 1
        """,
    )
    assert render(error) == [
        "FILE:9: scopes.telegram:-100123.limits.tokens_per_dya: unknown key; "
        "did you mean 'tokens_per_day'?",
    ]
    error = load_error(
        tmp_path,
        """
        providers:
          main: {type: debug}
        scopes:
          "telegram:-100123":
            limits: {usd_per_day: 1}
        """,
    )
    assert render(error) == [
        "FILE:6: scopes.telegram:-100123.limits.usd_per_day: needs prices on every provider; "
        "providers.main has none",
    ]


def test_usage_reads_scope_pools_without_the_providers_section(tmp_path: Path) -> None:
    """`chatbridge usage` loads only its sections: a scope's `provider` and
    `model` cannot be checked there, and must not fail the load."""
    from chatbridge.config import load_config
    from chatbridge.core.app.usage import USAGE_SECTIONS

    path = tmp_path / "chatbridge.yaml"
    path.write_text(
        "providers:\n  main:\n    type: openai\n    model: m\n    api_key: ${MISSING_KEY}\n"
        "scopes:\n  telegram:\n    provider: main\n    model: m2\n"
        "    limits: {tokens_per_day: 9}\n"
    )
    cfg = load_config(path, {}, only=USAGE_SECTIONS)
    pool = cfg.scopes["telegram"].limits
    assert pool is not None
    assert pool.tokens_per_day == 9
    text = path.read_text().replace("${MISSING_KEY}", "sk-x")
    error = load_error(tmp_path, text.replace("provider: main", "provider: mian"))
    assert [issue.path for issue in error.issues] == ["scopes.telegram.provider"]


def test_each_provider_reserves_its_most_expensive_image(tmp_path: Path) -> None:
    from chatbridge.core.app.wiring import policy_from_config

    cfg = load_ok(
        tmp_path,
        """
        providers:
          default: main
          fallback: [mini, claude, local, echo]
          main: {type: openai, model: gpt-5.4-mini, api_key: k}
          mini: {type: openai, model: gpt-4o-mini, api_key: k}
          claude: {type: anthropic, model: claude-sonnet-4-5, api_key: k}
          local: {type: openai, model: llama3.2, base_url: "http://127.0.0.1:1/v1", vision: false}
          echo: {type: debug}
        scopes:
          "telegram:-1001": {provider: main, model: GPT-4o-mini-2024-07-18}
        """,
    )
    terms = policy_from_config(cfg).terms
    assert {name: t.image_tokens for name, t in terms.items()} == {
        # A scope asks `main` with gpt-4o-mini, whose tiles cost most.
        "main": 2_833 + 8 * 5_667,
        "mini": 2_833 + 8 * 5_667,
        "claude": 4_800,
        "local": 0,  # it is never sent an image
        "echo": 0,
    }
