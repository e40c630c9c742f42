"""Photos, voice messages and files: what core does with a message's attachments.

Adapters only describe attachments (`core.models.Attachment`) and fetch them
on request (`core.ports.FileSource`); this package decides: images and PDFs
go to the model inline (as `MediaPart`s of the user turn), voice is
transcribed, text files are read as text, everything else gets one sentence.
"""

from chatbridge.core.media._kinds import clean_attachments, kind_of
from chatbridge.core.media._live import KEEP_TURNS, LiveMedia
from chatbridge.core.media._prepare import MediaDesk, Prepared, accepted_media, images_to_fetch
from chatbridge.core.media._settings import MediaSettings, parse_size
from chatbridge.core.media._tokens import image_tokens

__all__ = [
    "KEEP_TURNS",
    "LiveMedia",
    "MediaDesk",
    "MediaSettings",
    "Prepared",
    "accepted_media",
    "clean_attachments",
    "image_tokens",
    "images_to_fetch",
    "kind_of",
    "parse_size",
]
