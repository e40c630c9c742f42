"""The most prompt tokens one image can cost a provider: what a limit reserves.

A limit's hold must never be below what the provider will report, and an
image's tokens depend on its pixels, which chatbridge does not decode. So
each provider entry reserves, per image, the most any image can cost on it:

- OpenAI: `gpt-4o-mini` counts 2,833 + 5,667 per 512-px tile, at most 8 tiles
  (a high-detail image is scaled to fit 2048 px, then its short side to
  768 px): 48,169. Other models count less: tiles at 85 + 170 each (1,445 at
  most), or 32-px patches capped at 1,536 times the model's multiplier (the
  largest published, 2.46, makes 3,779): 4,000 covers them. An
  OpenAI-compatible server's own model is assumed to stay within that too.
- Anthropic: about width x height / 750 after scaling; up to 1,568 px (about
  1,600 tokens) on older models, up to 2,576 px (about 4,784 tokens) on the
  newest: 4,800.

The provider's report settles the hold, so the difference is given back when
the answer ends. PDFs are not estimated (the page count is unknown before
the provider reads them); their tokens count when reported.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ANTHROPIC_IMAGE_TOKENS", "MINI_IMAGE_TOKENS", "OPENAI_IMAGE_TOKENS", "image_tokens"]

OPENAI_IMAGE_TOKENS = 4_000
MINI_IMAGE_TOKENS = 2_833 + 8 * 5_667  # gpt-4o-mini, 8 tiles
ANTHROPIC_IMAGE_TOKENS = 4_800


def image_tokens(kind: str, models: Iterable[str], *, vision: bool = True) -> int:
    """Tokens to reserve per image for a provider entry of type `kind` that
    may be asked with any of `models` (its own and the scopes' overrides);
    0 when it takes no images."""
    if not vision:
        return 0
    if kind == "anthropic":
        return ANTHROPIC_IMAGE_TOKENS
    if kind == "openai":
        if any("4o-mini" in model.lower() for model in models):
            return MINI_IMAGE_TOKENS
        return OPENAI_IMAGE_TOKENS
    return 0
