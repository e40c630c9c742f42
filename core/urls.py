"""Redis URLs may carry a password: mask it for display, list it for the log scrubber."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

__all__ = ["mask_url", "url_is_usable", "url_secrets"]


def url_is_usable(url: str) -> bool:
    """False when the URL's port or netloc cannot be parsed (`host:abc`)."""
    try:
        parts = urlsplit(url)
        _ = parts.port, parts.password
    except ValueError:
        return False
    return True


def mask_url(url: str) -> str:
    """`url` with its password (userinfo or `?password=`) replaced by ``***``."""
    if not url_is_usable(url):
        return "<unparsable Redis URL>"
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = "&".join(
        f"{p.partition('=')[0]}=***" if unquote(p.partition("=")[0]).lower() == "password" else p
        for p in parts.query.split("&")
    )
    return parts._replace(netloc=netloc, query=query).geturl()


def url_secrets(url: str) -> list[str]:
    """Every spelling of the URL's password, longest first, to scrub from messages."""
    found: set[str] = set()
    try:
        parts = urlsplit(url)
        raw = parts.netloc.rpartition("@")[0].partition(":")[2] if "@" in parts.netloc else ""
        found.update((raw, unquote(raw)))
        for p in parts.query.split("&"):
            name, _, value = p.partition("=")
            if unquote(name).lower() == "password":
                found.update((value, unquote(value)))
    except ValueError:
        pass
    return sorted((s for s in found if s), key=len, reverse=True)
