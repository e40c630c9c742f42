"""Issue 11.1/11.7/11.10: any YAML text gives a config or a ConfigError, quickly.

Hypothesis writes random structures (real config keys, typos of them, random
keys; huge ints, deep nesting, anchors and aliases, random bytes as text) and
`load_config_text` must return a config or raise `ConfigError`, never any
other exception, and no ConfigError message may quote a secret planted at a
secret key (or a typo of one, or in place of a section or the whole file).
"""

from __future__ import annotations

import os
import typing
from typing import Any

import pydantic
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatbridge.config import ChatbridgeConfig, ConfigError, ProviderConfig, load_config_text
from tests.support import tally

EXAMPLES = int(os.environ.get("CHATBRIDGE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PLANTED = "sk-PLANTED-"


def _keys(model: type[pydantic.BaseModel]) -> set[str]:
    found: set[str] = set()
    for key, info in model.model_fields.items():
        found.add(key)
        for kind in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):
                found |= _keys(kind)
    return found


REAL_KEYS = sorted(_keys(ChatbridgeConfig) | _keys(ProviderConfig) | {"main", "backup"})
SECRET_KEYS = ["token", "api_key", "bot_token", "app_token", "signing_secret", "webhook_secret"]


def _typos(key: str) -> list[str]:
    return [key[:-1], key + "s", key[1:] + key[0], key.upper(), key.replace("_", "-")]


TYPO_KEYS = sorted({t for k in REAL_KEYS for t in _typos(k) if t})
SECRET_TYPOS = sorted({t for k in SECRET_KEYS for t in _typos(k) if t})

key = st.one_of(
    st.sampled_from(REAL_KEYS), st.sampled_from(REAL_KEYS), st.sampled_from(TYPO_KEYS),
    st.text(max_size=10),
)  # fmt: skip
scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(10**400), 10**400), st.floats(),
    st.text(max_size=20), st.sampled_from(["1s", "5m", "-1", "1e999", "${NOT_SET}", "~", "yes"]),
)  # fmt: skip
secret = st.builds(lambda s: f"{PLANTED}{s}", st.text("abcdefXYZ0123456789_-", min_size=4))
planted = st.tuples(st.sampled_from(SECRET_KEYS + SECRET_TYPOS), secret)
tree = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(key, inner, max_size=5),
        # a secret key beside random siblings, as in a real section
        st.builds(lambda pairs, rest: {**rest, **dict(pairs)}, st.lists(planted, max_size=2),
                  st.dictionaries(key, inner, max_size=3)),
    ),
    max_leaves=12,
)  # fmt: skip


def _dump(value: Any) -> str:
    """YAML for `value`."""
    return yaml.safe_dump(value, allow_unicode=True)


def _shared(value: Any) -> dict[str, Any]:
    """The same node twice: safe_dump writes an anchor and an alias."""
    return {"bot": value, "engine": value, "platforms": {"telegram": value}}


def _deep(depth: int, flow: bool) -> str:
    """`depth` levels of nesting, written as text (safe_dump itself would recurse too deep)."""
    if flow:
        return "engine: " + "[" * depth + "1" + "]" * depth + "\n"
    return "".join("  " * i + "engine:\n" for i in range(depth)) + "  " * depth + "x: 1\n"


config_text = st.one_of(
    tree.map(_dump),
    st.dictionaries(st.sampled_from(list(ChatbridgeConfig.model_fields)), tree, max_size=5).map(
        _dump
    ),
    tree.map(_shared).map(_dump),
    st.builds(_deep, st.integers(1, 800), st.booleans()),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.text(max_size=200),
    # alias bombs and self-reference of every size
    st.integers(1, 12).map(
        lambda n: "a0: &a0 [x, x]\n" + "".join(
            f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, n))
    ),
    st.just("a: &a [*a]\n"),
    secret.map(lambda s: f"{s}\n"),
    secret.map(lambda s: f"platforms:\n  telegram: {s}\n"),
)  # fmt: skip


def _load(text: str) -> None:
    try:
        load_config_text(text, source="fuzz.yaml", environ={})
    except ConfigError as exc:
        messages = [str(exc), *map(str, exc.issues)]
    else:
        return
    assert not any(PLANTED in m for m in messages), messages[0]


@FUZZ
@given(text=config_text)
def test_any_yaml_text_is_a_config_or_a_config_error_quoting_no_secret(text: str) -> None:
    tally.add("inputs fuzzed", "config YAML texts")
    _load(text)


@settings(FUZZ, max_examples=max(1, EXAMPLES // 3))
@given(data=st.dictionaries(st.sampled_from(list(ChatbridgeConfig.model_fields)), tree, max_size=6))
def test_secret_keys_beside_mistakes_are_never_quoted(data: dict[str, Any]) -> None:
    tally.add("inputs fuzzed", "config sections with planted secrets")
    data["platforms"] = {"telegram": {"enabled": "maybe", "token": f"{PLANTED}tg"}}
    _load(_dump(data))


def test_a_secret_under_identities_is_not_echoed() -> None:
    tally.add("inputs fuzzed", "config secret under identities")
    _load(f"identities:\n  token: {PLANTED}0000\n")


def test_a_secret_aliased_into_a_quoting_field_is_not_echoed() -> None:
    tally.add("inputs fuzzed", "config secret aliased into another field")
    _load(f"platforms: {{slack: {{bot_token: &x {PLANTED}8, enabled: *x}}}}\n")
