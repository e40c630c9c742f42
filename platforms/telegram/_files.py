"""Telegram attachments to bytes: `getFile`, then `<base_file_url><token>/<file_path>`.

The Bot API serves files at `…/file/bot<token>/<file_path>` (PTB's
`base_file_url`); chatbridge derives it from `platforms.telegram.base_url` by
putting `/file` before its final `/bot`, so a local Bot API server works too.
The URL holds the token: it is never logged and never leaves this module.
"""

from __future__ import annotations

from telegram import Bot
from telegram.error import TelegramError

from chatbridge.core.models import Attachment
from chatbridge.core.ports import ByteSink, FetchFailed, FileTooLarge
from chatbridge.platforms._download import Downloader

from ._filters import photo_sizes

__all__ = ["TelegramFiles", "file_base_url"]


def file_base_url(base_url: str) -> str:
    """`https://api.telegram.org/bot` -> `https://api.telegram.org/file/bot`."""
    head, sep, tail = base_url.rstrip("/").rpartition("/bot")
    if not sep or tail:
        return base_url.rstrip("/") + "/file/bot"
    return f"{head}/file/bot"


class TelegramFiles:
    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self._downloader = Downloader("telegram")

    async def fetch(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        """See `core.ports.FileSource.fetch_file`; a photo is fetched in the
        largest size that fits `limit`."""
        try:
            sizes = photo_sizes(attachment.ref)
        except (ValueError, TypeError) as exc:
            raise FetchFailed(f"telegram file: bad reference ({type(exc).__name__})") from None
        file_id = attachment.ref
        if sizes is not None:
            fitting = [file_id for file_id, size in sizes if size <= limit]
            if not fitting:
                raise FileTooLarge(f"telegram photo: every size is over {limit}")
            file_id = fitting[0]
        try:
            file = await self._bot.get_file(file_id)
        except TelegramError as exc:
            if "too big" in str(exc).lower():
                raise FileTooLarge("telegram file: the Bot API says it is too big") from None
            raise FetchFailed(f"telegram getFile: {type(exc).__name__}") from None
        except Exception as exc:  # a malformed answer makes PTB raise plain errors
            raise FetchFailed(f"telegram getFile: {type(exc).__name__}") from None
        if file.file_size is not None and file.file_size > limit:
            raise FileTooLarge(f"telegram file: {file.file_size} bytes over {limit}")
        if not file.file_path:
            raise FetchFailed("telegram getFile: no file_path")
        return await self._downloader.get(file.file_path, limit=limit, sink=sink)

    async def aclose(self) -> None:
        await self._downloader.aclose()
