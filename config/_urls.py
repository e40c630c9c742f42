"""Redis URL masking lives in core (the store needs it too); config re-exports it."""

from chatbridge.core.urls import mask_url, url_is_usable, url_secrets

__all__ = ["mask_url", "url_is_usable", "url_secrets"]
