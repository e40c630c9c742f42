"""Slack files to bytes: `url_private_download` with the bot token.

Slack wants `Authorization: Bearer <bot token>` and the `files:read` scope;
without them it answers with its HTML login page (often as 200), which is
refused here rather than read as the file. The token goes only to Slack's own
hosts (`*.slack.com`, or the host of a configured Web API root such as a
local test server), never to another URL a payload might carry.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from chatbridge.core.models import Attachment
from chatbridge.core.ports import ByteSink, FetchFailed
from chatbridge.platforms._download import Downloader

__all__ = ["SlackFiles"]


class SlackFiles:
    def __init__(self, token: str, *, base_url: str) -> None:
        self._token = token
        self._api_host = urlsplit(base_url).hostname or ""
        self._downloader = Downloader("slack")

    async def fetch(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        host = urlsplit(attachment.ref).hostname or ""
        if not (host == "slack.com" or host.endswith(".slack.com") or host == self._api_host):
            raise FetchFailed("slack file: not on a Slack host; the token is not sent there")
        return await self._downloader.get(
            attachment.ref,
            limit=limit,
            headers={"Authorization": f"Bearer {self._token}"},
            refuse_html=not attachment.mime.startswith("text/html"),
            sink=sink,
        )

    async def aclose(self) -> None:
        await self._downloader.aclose()
