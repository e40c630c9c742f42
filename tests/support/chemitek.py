"""The seed's story as a tiny scripted "model" for the fake LLM servers.

It answers like a model would: the parcel question gets tracking details;
"Soll Mittwoch kommen" is understood only if the tracking number is somewhere
in what the model was sent (a live session or the injected history).
"""

from __future__ import annotations

from typing import Any

FIRST = "Check wo das Chemitek-Paket bleibt"
SECOND = "Soll Mittwoch kommen"
TRACKING = (
    "UPS Tracking 1Z999AA10123456784 — Status: In Transit.\n"
    "Voraussichtliche Zustellung: Mittwoch, 09.04."
)
UNDERSTOOD = "Genau: Das Chemitek-Paket (1Z999AA10123456784) soll am Mittwoch, 09.04., kommen."
CONFUSED = "Ich bin mir nicht sicher, worauf du dich beziehst. Kannst du mir mehr Kontext geben?"


def _texts(body: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part.get("text", "") for part in content if isinstance(part, dict)]
    return texts


def chemitek_model(body: dict[str, Any]) -> str:
    texts = _texts(body)
    last = texts[-1] if texts else ""
    if last.rstrip().endswith(SECOND):
        seen = "\n".join(texts)
        return UNDERSTOOD if "1Z999AA10123456784" in seen else CONFUSED
    if FIRST in last:
        return TRACKING
    return "Okay."
