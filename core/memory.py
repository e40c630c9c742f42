"""Memory rings: what one exchange leaves behind, who may see it, and the
`<conversation_history>` block that bridges a new session to the last ones.

The format follows the seed exactly (a heading, then `[dd.mm. HH:MM]`,
`User:` and `Bot:` lines per entry), plus one line with the current time so
that "Soll Mittwoch kommen" can be resolved against today's date.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from chatbridge.core.incoming import skeleton
from chatbridge.core.models import ChatKind, Conversation, MemoryEntry

__all__ = [
    "JOINED_LINE",
    "HistoryTexts",
    "build_bridge",
    "cut_summary",
    "cut_text",
    "format_time",
    "neutralise",
    "scope_of",
    "visible_entries",
]

ELLIPSIS = "…"
JOINED_LINE = " \u23ce "  # " ⏎ ": where `neutralise` joined a forged line to the one before


@dataclass(frozen=True, slots=True)
class HistoryTexts:
    heading: str
    current_message: str
    current_time: str
    weekdays: tuple[str, ...]


HISTORY_TEXTS = {
    "de": HistoryTexts(
        heading="Letzte Gespräche mit dem User:",
        current_message="Aktuelle Nachricht:",
        current_time="Aktuelle Zeit:",
        weekdays=(
            "Montag",
            "Dienstag",
            "Mittwoch",
            "Donnerstag",
            "Freitag",
            "Samstag",
            "Sonntag",
        ),
    ),
    "en": HistoryTexts(
        heading="Recent conversations with the user:",
        current_message="Current message:",
        current_time="Current time:",
        weekdays=(
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ),
    ),
}


# -- what `neutralise` matches (against the skeleton: folded, lower case) -------

_LINE_BREAK = re.compile("\r\n|[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # all but "\n"
_LINE_BREAK_START = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # of each of those
_LEET = {"a": "a4@", "e": "e3", "i": "i1l|!", "o": "o0", "s": "s5$", "t": "t7+"}


def _spelled(word: str, between: str = "") -> str:
    """A pattern for `word` in the skeleton, digits and signs for letters too."""
    letters = []
    for char in word:
        if char == " ":
            letters.append(r"\s*")
        elif char in _LEET:
            letters.append(f"[{re.escape(_LEET[char])}]")
        else:
            letters.append(re.escape(char))
    return between.join(letters)


_OPEN = r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?|%3c|\\u0*3c|\\x3c)"
_CLOSE = r"(?:>|&gt;?|&#0*62;?|&#x0*3e;?|%3e|\\u0*3e|\\x3e)"
_NAME = (
    _spelled("conversation", r"[^\w<>\n]?")
    + r"(?:[^\w<>]|_){0,3}"
    + _spelled("history", r"[^\w<>\n]?")
)
_TAG = re.compile(
    rf"(?P<open>{_OPEN})[^\w<>]{{0,8}}{_NAME}"
    rf"(?:[^<>\n]{{0,200}}?(?P<close>{_CLOSE})|)"
)
_LABELS = sorted(
    {
        label
        for texts in HISTORY_TEXTS.values()
        for label in ("user", "bot", texts.heading, texts.current_message, texts.current_time)
        for label in [skeleton(label)[0].rstrip(":").strip()]
    }
)
_HEADER = (
    r"[\[({]\s*\d{1,2}\s*\.\s*\d{1,2}\s*\."  # [05.04. (any bracket)
    r"|\d{1,2}\s*\.\s*\d{1,2}\s*\.\s*(?:\d{2,4})?\s*\d{1,2}\s*:\s*\d{2}[\W_]*$"  # 05.04. 14:23
)
_FORGED_LINE = re.compile(
    rf"[\W_]*?(?:{_HEADER}|(?:{'|'.join(_spelled(label) for label in _LABELS)})"
    rf"[^\w:\n{JOINED_LINE.strip()}]{{0,3}}:)"
)
_HAS_WORD = re.compile(r"[^\W_]")  # a letter or a digit


_NEUTRALISED: dict[str, str] = {}  # text -> neutralised, and each result -> itself
_NEUTRALISED_KEPT = 512


def neutralise(text: str) -> str:
    """Untrusted text (a user's message, a stored answer) made inert in a prompt.

    Nothing in the result opens, closes or forges a history block or an entry
    line, whatever the spelling. Every line break `str.splitlines` knows
    becomes "\\n"; then two rules, both matched against the `skeleton` (NFKD,
    case-folded, look-alike brackets, colons and letters folded to ASCII,
    invisible and zero-width characters, bidi controls and combining marks
    dropped, Unicode tag characters read as the ASCII they copy):

    1. **Tags.** An opener (`<`, any look-alike, `&lt;`, `&#60;`, `&#x3c;`,
       `%3c`, `\\u003c`, `\\x3c`), at most 8 non-word characters (`/`, spaces,
       `!--` …), the name `conversation_history` (its letters also as `0` for
       o, `1`/`l`/`|` for i …, up to 3 separators between the words, one
       between letters), then optionally attributes and a closer on the same
       line: the opener is replaced by "(", the closer by ")". This repeats
       until nothing matches (`<<x` needs two rounds), so
       `</ CONVERSATION_HISTORY foo="x">` becomes `(/ CONVERSATION_HISTORY foo="x")`.
    2. **Lines.** A line other than the first (which always follows a label
       in the bridge) that, after leading whitespace and punctuation (`**`,
       `>`, `-` …), starts like an entry header (`[05.04.`, any bracket
       before a `dd.mm.` date, or a whole line `05.04. 14:23`) or a label of
       the bridge (`User:`, `Bot:`, the heading, `Aktuelle Nachricht:`,
       `Aktuelle Zeit:`, `Current message:`, `Current time:`, any case, any
       space before the colon) is joined to the line before with " ⏎ ". The
       line before is the nearest with a letter or digit (or the first line):
       blank lines between are dropped, lines of only punctuation such as
       "```" are joined along, so that no line starts like an entry line.

    Anything else is kept exactly: `<b>`, code, emoji, umlauts, RTL text and
    bidi controls (they cannot hide a line start: the skeleton drops them).
    Idempotent; the result is never more than 2 characters per line longer.
    Cached (a pure function of the text): the same ring entries are shown in
    many blocks, and a trimmed session tries several before one fits. Being
    idempotent, each result is cached as its own: a stored user turn (made
    by this function) that heads a trimmed session is not worked again.
    """
    done = _NEUTRALISED.get(text)
    if done is None:
        done = text
        if not _plain_line(text):  # most of a user's messages are
            done = _inert_lines(*_inert_tags(_newlines(text)))
        if len(_NEUTRALISED) >= _NEUTRALISED_KEPT:
            del _NEUTRALISED[next(iter(_NEUTRALISED))]  # the oldest
        _NEUTRALISED[text] = done
        _NEUTRALISED[done] = done
    return done


def _newlines(text: str) -> str:
    """Every line break as "\n". Most texts have no other kind: searching for
    one is a third of what substituting costs (the echo's summaries, ~260
    characters over many lines: 0.8 µs against 2.8)."""
    return _LINE_BREAK.sub("\n", text) if _LINE_BREAK_START.search(text) else text


_OPENER_START = re.compile(r"[<&%\\]")  # the first character of every opener rule 1 knows


def _plain_line(text: str) -> bool:
    """True for text that `neutralise` returns as it is, known without
    folding it: one line of printable ASCII without a character that can
    start an opener. No line break, so rule 2 has no line to look at; its
    skeleton is its lower case, so rule 1 would need one of `<&%\\` in it
    (a user's message is often such a line)."""
    return text.isascii() and text.isprintable() and _OPENER_START.search(text) is None


def _inert_tags(text: str) -> tuple[str, str]:
    """Rule 1 until nothing matches; returns the text and its skeleton.

    Each round turns at least one opener into "(", which is no opener, so the
    loop ends (and since an opener must be within 8 characters of the name,
    after at most 9 rounds).
    """
    while True:
        folded, origin = skeleton(text)
        edits: list[tuple[int, int, str]] = []
        for match in _TAG.finditer(folded):
            edits.append((*_source_span(origin, match.span("open")), "("))
            if match.group("close"):
                edits.append((*_source_span(origin, match.span("close")), ")"))
        if not edits:
            return text, folded
        pieces: list[str] = []
        done = 0
        for start, end, replacement in sorted(edits):
            if start >= done:  # two matches never share a character; be sure
                pieces += [text[done:start], replacement]
                done = end
        text = "".join([*pieces, text[done:]])


def _source_span(origin: list[int], span: tuple[int, int]) -> tuple[int, int]:
    return origin[span[0]], origin[span[1] - 1] + 1


def _inert_lines(text: str, folded: str) -> str:
    """Rule 2: `folded` is the skeleton of `text`, line for line."""
    lines, folded_lines = text.split("\n"), folded.split("\n")
    kept, kept_folded = lines[:1], folded_lines[:1]
    for line, folded_line in zip(lines[1:], folded_lines[1:], strict=True):
        if not _FORGED_LINE.match(folded_line):
            kept.append(line)
            kept_folded.append(folded_line)
            continue
        # Join onto the nearest line that starts with something a label or a
        # date cannot continue (a letter or digit), or onto the first line:
        # a line of only "---" or "```" would let the forgery start its line.
        joined = [line]
        while len(kept) > 1 and not _HAS_WORD.search(kept_folded[-1]):
            if kept_folded[-1].strip():
                joined.append(kept[-1])
            kept.pop()
            kept_folded.pop()
        kept[-1] = JOINED_LINE.join([kept[-1], *reversed(joined)])
    return "\n".join(kept)


def cut_text(text: str, limit: int) -> str:
    """At most `limit` chars; a cut lands on a word boundary and ends in "…"."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if not text[limit - 1].isspace():  # the cut is inside a word: back to its start
        space = head.rfind(" ")
        if space > limit // 2:  # a boundary that keeps most of the text
            head = head[:space]
    return head.rstrip() + ELLIPSIS


def cut_summary(answer: str, limit: int) -> str:
    """The seed's summary: whole leading lines while they fit, never empty.

    The seed stored "" when the first line alone was longer than the limit;
    here that line is cut at a word boundary instead.
    """
    kept: list[str] = []
    used = 0
    for line in _leading_lines(answer.strip(), limit):
        cost = len(line) + (1 if kept else 0)
        if used + cost > limit:
            break
        kept.append(line)
        used += cost
    summary = "\n".join(kept).strip()
    return summary or cut_text(answer, limit)


def _leading_lines(text: str, limit: int) -> list[str]:
    """The lines of `text` that `cut_summary` can keep, without splitting all
    of a long answer. A kept line costs its length and one, and takes that
    and its line break (at most two characters): every line that fits ends
    within `2 * limit + 1` characters, and a line the head cuts short is
    still longer than what is left of the limit."""
    return text[: 2 * limit + 2].splitlines()


def scope_of(conversation: Conversation) -> str:
    """The audience an exchange happened in: "private", or the group's chat ID."""
    if conversation.kind is ChatKind.PRIVATE:
        return ChatKind.PRIVATE.value
    return conversation.chat_id


def visible_entries(
    entries: Iterable[MemoryEntry], conversation: Conversation
) -> list[MemoryEntry]:
    """Only entries the current audience has already seen.

    Private entries never reach a group; a group's entries only that group.
    (Entries are already one user's: rings are per user.)
    """
    scope = scope_of(conversation)
    return [entry for entry in entries if entry.scope == scope]


@functools.lru_cache(maxsize=1024)
def format_time(timestamp: float, tz: tzinfo | None) -> str:
    """The seed's entry time, `05.04. 14:23`; cached, as a trimmed session
    shows the same entries in block after block."""
    return datetime.fromtimestamp(timestamp, tz).strftime("%d.%m. %H:%M")


@functools.lru_cache(maxsize=256)
def _entry_lines(entry: MemoryEntry, tz: tzinfo | None) -> str:
    """An entry's three lines in the block (after a blank one). Cached: an
    entry never changes, and a trim builds the block of nearly the same
    entries for each count it tries, every few messages (the echo's: two
    blocks every third message), each entry costing two `neutralise` lookups
    and its time otherwise."""
    user, bot = neutralise(entry.user_message), neutralise(entry.assistant_summary)
    return f"\n[{format_time(entry.timestamp, tz)}]\nUser: {user}\nBot: {bot}"


def _now_line(now: float, tz: tzinfo | None, texts: HistoryTexts) -> str:
    return _now_line_at(int(now // 1), tz, texts)


@functools.lru_cache(maxsize=16)
def _now_line_at(second: int, tz: tzinfo | None, texts: HistoryTexts) -> str:
    """`_now_line` of a whole second (all it shows is its minute; UTC
    offsets are whole seconds): messages of one second share it."""
    moment = datetime.fromtimestamp(second, tz)
    weekday = texts.weekdays[moment.weekday()]
    return f"{texts.current_time} {weekday}, {moment:%d.%m.%Y %H:%M}"


def build_bridge(
    entries: Sequence[MemoryEntry],
    message: str,
    *,
    now: float,
    language: str,
    tz: tzinfo | None,
) -> str:
    """The first user turn of a new session: history block, time, message.

    With no entries the message goes out unchanged, as in the seed.
    """
    if not entries:
        return message
    texts = HISTORY_TEXTS[language]
    lines = ["<conversation_history>", texts.heading]
    lines += [_entry_lines(entry, tz) for entry in entries]
    lines.append("</conversation_history>")
    block = "\n".join(lines)
    return f"{block}\n\n{_now_line(now, tz, texts)}\n{texts.current_message} {neutralise(message)}"
