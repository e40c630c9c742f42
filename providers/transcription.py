"""Voice to text with OpenAI's transcription API (`audio.transcriptions`), as a
`core.ports.Transcriber`.

One `openai.AsyncOpenAI` client, built on first use (the SDK import is slow),
with the key and base URL of the `openai` provider entry `media.transcription`
names. SDK errors become `ProviderError`s naming that entry, never the key.
"""

from __future__ import annotations

from typing import Any

from chatbridge.core.ports import MediaError, ProviderError, ProviderUnavailable
from chatbridge.providers._wire import PLACEHOLDER_KEY, status_error

__all__ = ["OpenAITranscriber"]

# What OpenAI's endpoint takes, by the file name's suffix; Telegram's OGG/Opus
# voice notes are `.oga` there and go as `.ogg`.
_SUFFIXES = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "m4a",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
    "video/mp4": "mp4",
    "video/webm": "webm",
}
_KNOWN = frozenset(_SUFFIXES.values()) | {"mpga", "mpeg", "oga"}


def upload_name(name: str, mime: str) -> str:
    """A file name whose suffix tells the API the format (it goes by the name)."""
    stem, dot, suffix = name.rpartition(".")
    if dot and suffix.lower() in _KNOWN:
        return f"{stem}.ogg" if suffix.lower() == "oga" else name
    wanted = _SUFFIXES.get(mime.split(";")[0].strip().lower(), "ogg")
    return f"{stem or name or 'voice'}.{wanted}"


class OpenAITranscriber:
    def __init__(
        self,
        entry: str,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        max_retries: int,
    ) -> None:
        self.entry = entry
        self.model = model
        self._secret = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: Any = None

    async def transcribe(self, audio: bytes | bytearray, *, name: str, mime: str) -> str:
        """The words spoken (`text` of the answer); see `core.ports.Transcriber`."""
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self._secret or PLACEHOLDER_KEY,
                base_url=self._base_url,
                timeout=self._timeout,
                max_retries=self._max_retries,
            )
        file = (upload_name(name, mime), bytes(audio), mime or "audio/ogg")
        try:
            result = await self._client.audio.transcriptions.create(model=self.model, file=file)
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            error: ProviderError = status_error(
                self.entry,
                model=self.model,
                status=exc.status_code,
                error_type=body.get("type"),
                message=body.get("message"),
                code=body.get("code"),
                secret=self._secret,
            )
            if exc.status_code in (400, 415, 422):
                raise MediaError(f"transcription refused the audio ({error})") from exc
            raise error from exc
        except openai.OpenAIError as exc:
            raise ProviderUnavailable(
                f"Transcription with {self.entry!r} failed ({type(exc).__name__}).",
                provider=self.entry,
            ) from exc
        text = getattr(result, "text", result)
        return text if isinstance(text, str) else ""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
