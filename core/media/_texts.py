"""The sentences about attachments, in the two languages of `bot.language`."""

from __future__ import annotations

__all__ = ["PLACEHOLDERS", "media_say"]

PLACEHOLDERS = {
    "de": {"image": "[Bild]", "pdf": "[PDF {name}]", "file": "--- Datei {name} ---"},
    "en": {"image": "[image]", "pdf": "[PDF {name}]", "file": "--- file {name} ---"},
}

_TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "too_large": "{name} is larger than {limit}, so I did not open it.",
        "fetch_failed": "I could not download {name}, so I answered without it.",
        "images_off": "Images are switched off here, so I only read your text.",
        "no_vision": "The AI model here cannot look at images, so I only read your text.",
        "image_rejected": "The AI service would not take the image, so I only read your text.",
        "not_an_image": "{name} is not an image I can read (JPEG, PNG, GIF or WebP).",
        "voice_off": "Voice messages are switched off here; please type your message.",
        "no_transcription": "I cannot listen to voice messages here; please type your message.",
        "transcription_failed": "I could not transcribe your voice message; please try again.",
        "nothing_heard": "I could not make out any words in your voice message.",
        "not_text": "{name} does not look like a text file, so I did not read it.",
        "no_pdf": "The AI model here cannot read PDFs, so I did not open {name}.",
        "unsupported": (
            "I can read images, voice messages, text files and PDFs; {name} is none of them."
        ),
        "heard": "🎤 “{transcript}”",
    },
    "de": {
        "too_large": "{name} ist größer als {limit}, deshalb habe ich die Datei nicht geöffnet.",
        "fetch_failed": "{name} konnte ich nicht herunterladen; ich antworte ohne die Datei.",
        "images_off": "Bilder sind hier ausgeschaltet, deshalb lese ich nur deinen Text.",
        "no_vision": "Das KI-Modell hier kann keine Bilder ansehen; ich lese nur deinen Text.",
        "image_rejected": "Der KI-Dienst hat das Bild nicht angenommen; ich lese nur deinen Text.",
        "not_an_image": "{name} ist kein Bild, das ich lesen kann (JPEG, PNG, GIF oder WebP).",
        "voice_off": "Sprachnachrichten sind hier ausgeschaltet; bitte schreib mir.",
        "no_transcription": "Sprachnachrichten kann ich hier nicht anhören; bitte schreib mir.",
        "transcription_failed": (
            "Deine Sprachnachricht konnte ich nicht abschreiben; bitte versuch es noch einmal."
        ),
        "nothing_heard": "In deiner Sprachnachricht konnte ich keine Worte verstehen.",
        "not_text": "{name} sieht nicht nach einer Textdatei aus; ich habe sie nicht gelesen.",
        "no_pdf": "Das KI-Modell hier kann keine PDFs lesen; {name} habe ich nicht geöffnet.",
        "unsupported": (
            "Ich kann Bilder, Sprachnachrichten, Textdateien und PDFs lesen; "
            "{name} ist nichts davon."
        ),
        "heard": "🎤 „{transcript}“",
    },
}


def media_say(language: str, key: str, **values: object) -> str:
    table = _TEXTS.get(language, _TEXTS["en"])
    return table[key].format(**values)


def placeholder(language: str, key: str, **values: object) -> str:
    return PLACEHOLDERS.get(language, PLACEHOLDERS["en"])[key].format(**values)


def human_size(size: int) -> str:
    """`10485760` -> `10 MB` (1024-based, as the config writes sizes)."""
    for unit, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"
