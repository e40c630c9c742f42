"""The `media:` section and `vision`: defaults, sizes, and what `config check` refuses."""

from __future__ import annotations

import pytest

from chatbridge.config import ChatbridgeConfig, ConfigError, load_config_text

PROVIDERS = """
providers:
  main: {type: openai, model: gpt, api_key: sk}
  claude: {type: anthropic, model: c, api_key: ak, vision: false}
  default: main
"""


def _load(text: str) -> ChatbridgeConfig:
    return load_config_text(text, source="FILE", environ={})


def test_defaults_and_1024_based_sizes() -> None:
    config = _load(PROVIDERS)
    assert config.media.images is True
    assert config.media.voice is True
    assert config.media.transcription is None
    assert config.media.max_file_bytes == 10 * 1024 * 1024
    assert config.providers.entries["main"].vision is True
    assert config.providers.entries["claude"].vision is False
    sized = _load(PROVIDERS + "media: {max_file_bytes: 50KB}")
    assert sized.media.max_file_bytes == 51_200
    assert _load(PROVIDERS + "media: {max_file_bytes: 4096}").media.max_file_bytes == 4096


@pytest.mark.parametrize(
    ("media", "expected"),
    [
        ("media: {max_file_bytes: 10 apples}", "FILE:6: media.max_file_bytes: "),
        ("media: {transcription: {provider: mian}}", "did you mean 'main'"),
        ("media: {transcription: {provider: claude}}", "is not of type openai"),
        ("media: {imgaes: true}", "FILE:6: media.imgaes"),
    ],
)
def test_config_check_refuses_with_file_and_line(media: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(PROVIDERS + media)
    assert expected in str(caught.value)


def test_transcription_names_an_openai_entry_and_a_model() -> None:
    config = _load(PROVIDERS + "media: {transcription: {provider: main, model: whisper-1}}")
    assert config.media.transcription is not None
    assert (config.media.transcription.provider, config.media.transcription.model) == (
        "main",
        "whisper-1",
    )
