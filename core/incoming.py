"""Text from a platform, made safe for the store, the SDKs and the prompt.

Three contracts:

- `clean_text` makes any `str` encodable (UTF-8, JSON, SQLite) and free of
  control characters, changing ordinary text not at all.
- `cut_for_prompt` bounds what one message may cost in the prompt, with a
  note the model can see.
- `skeleton` is what a reader that is trying to be fooled sees: the folded
  form `memory.neutralise` matches its patterns against (TR39's "skeleton",
  simplified). It is never shown or stored.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["CUT_NOTES", "clean_text", "cut_for_prompt", "skeleton"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# Every line break `str.splitlines` knows, CRLF first so it becomes one "\n".
_LINE_BREAK = re.compile("\r\n|[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # C0 (not \t \n), DEL, C1

CUT_NOTES = {
    "de": "[Nachricht gekürzt: {kept} von {total} Zeichen]",
    "en": "[message cut: {kept} of {total} characters]",
}


@lru_cache(maxsize=1024)  # a message is cleaned on intake and again for its prompt
def clean_text(text: str) -> str:
    """`text` with what would crash an encoder or reach a terminal removed.

    - A surrogate pair becomes the character it encodes; a lone surrogate
      (U+D800..U+DFFF, which UTF-8, SQLite and the SDKs refuse) becomes U+FFFD.
    - CRLF, CR, VT, FF, FS, GS, RS, NEL, U+2028 and U+2029 become "\\n".
    - Every other C0 control but "\\t", DEL and every C1 control is removed
      (NUL included; an escape sequence loses its ESC and shows as text).

    Everything else is kept as it is: format characters (ZWJ in emoji, ZWNJ,
    bidi controls for RTL text), private-use and unassigned code points.
    `memory.neutralise` copes with what is kept. Idempotent.
    """
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _CONTROL.sub("", _LINE_BREAK.sub("\n", text))


def cut_for_prompt(text: str, limit: int, language: str) -> str:
    """`text` if it has at most `limit` characters; else its head and a note.

    The head is at most `limit` characters, cut at the last whitespace when
    that keeps more than half of them, and is followed by "\\n\\n" and the note
    in `language` (English for an unknown one), e.g. "[Nachricht gekürzt:
    7.998 von 20.000 Zeichen]". So the result is never longer than `limit`
    plus 2 plus the note. `limit` must be at least 1.
    """
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if space > limit // 2:
        head = head[:space]
    head = head.rstrip()
    return f"{head}\n\n{_note(len(head), len(text), language)}"


def _note(kept: int, total: int, language: str) -> str:
    template = CUT_NOTES.get(language, CUT_NOTES["en"])

    def number(value: int) -> str:
        grouped = f"{value:,}"
        return grouped.replace(",", ".") if language == "de" else grouped

    return template.format(kept=number(kept), total=number(total))


# -- the skeleton --------------------------------------------------------------

# Generated from the Unicode names: every non-combining character whose name
# holds LESS-THAN, LEFT[-POINTING] [DOUBLE|CURVED] ANGLE BRACKET/QUOTATION
# MARK or LEFT ARROWHEAD, plus CANADIAN SYLLABICS PA and PRECEDES; closers
# alike (characters that are both count as openers).
# tests/reliability/test_history_block.py re-derives the lists and compares.
_OPENERS = (
    "\u003c\u00ab\u02c2\u02f1\u1438\u2039\u2264\u2266\u2268\u226a\u226e\u2270\u2272\u2274"
    "\u2276\u2277\u2278\u2279\u227a\u22d6\u22d8\u22da\u22db\u22dc\u22e6\u2329\u2343\u276c"
    "\u276e\u2770\u27e8\u27ea\u2976\u2977\u2991\u2993\u2996\u29c0\u29fc\u2a79\u2a7b\u2a7d"
    "\u2a7f\u2a81\u2a83\u2a85\u2a87\u2a89\u2a8b\u2a8c\u2a8d\u2a8f\u2a90\u2a91\u2a92\u2a93"
    "\u2a94\u2a95\u2a97\u2a99\u2a9b\u2a9d\u2a9f\u2aa1\u2aa3\u2aa4\u2aa5\u2aa6\u2aa8\u2af7"
    "\u2af9\u3008\u300a\ufe3d\ufe3f\ufe64\uff1c"
)
_CLOSERS = (
    "\u003e\u00bb\u02c3\u02f2\u1433\u203a\u2265\u2267\u2269\u226b\u226f\u2271\u2273\u2275"
    "\u227b\u22d7\u22d9\u22dd\u22e7\u232a\u2344\u2369\u276d\u276f\u2771\u27e9\u27eb\u2978"
    "\u2992\u2994\u2995\u29c1\u29fd\u2a7a\u2a7c\u2a7e\u2a80\u2a82\u2a84\u2a86\u2a88\u2a8a"
    "\u2a8e\u2a96\u2a98\u2a9a\u2a9c\u2a9e\u2aa0\u2aa2\u2aa7\u2aa9\u2af8\u2afa\u2b43\u3009"
    "\u300b\ufe3e\ufe40\ufe65\uff1e"
)
_SQUARE_OPENERS = "\uff3b\u3010\u3014\u3016\u3018\u301a\u27e6\u2045"  # fullwidth, CJK, ...
_COLONS = "\uff1a\ufe55\ufe13\u2236\ua789\u02d0\u02f8\u05c3\u0703\u0704\u16ec\u205a"
# Letters of other scripts (Cyrillic, Greek, Armenian, Coptic) and Latin
# small capitals that read as a Latin letter; NFKD already folds fullwidth,
# mathematical, circled and superscript letters.
_LOOKALIKE_LETTERS = {
    "a": "\u0430\u0410\u03b1\u0391\u0251\u1d00",
    "b": "\u044c\u042c\u0432\u0412\u03b2\u0392\u0299\u0185",
    "c": "\u0441\u0421\u03f2\u03f9\u1d04\u2ca5",
    "d": "\u0501\u0500\u1d05",
    "e": "\u0435\u0415\u03b5\u0395\u04bd\u1d07\u212e\u025b",
    "g": "\u0261\u0262",
    "h": "\u04bb\u04ba\u041d\u043d\u0397\u029c\u0570",
    "i": "\u0456\u0406\u03b9\u0399\u04c0\u04cf\u026a\u0131\u0269\u01c0",
    "j": "\u0458\u0408",
    "k": "\u043a\u041a\u03ba\u039a\u1d0b",
    "m": "\u043c\u041c\u039c\u1d0d",
    "n": "\u043f\u03b7\u039d\u0578\u0274",
    "o": "\u043e\u041e\u03bf\u039f\u03c3\u0585\u1d0f\u2c9f",
    "p": "\u0440\u0420\u03c1\u03a1\u1d18",
    "q": "\u051b",
    "r": "\u0433\u0280\u1d26",
    "s": "\u0455\u0405\ua731",
    "t": "\u0442\u0422\u03c4\u03a4\u1d1b",
    "u": "\u03c5\u057d\u1d1c",
    "v": "\u03bd\u0475\u0474\u1d20",
    "w": "\u051d\u0461\u1d21",
    "x": "\u0445\u0425\u03c7\u03a7",
    "y": "\u0443\u0423\u04af\u04ae\u03a5\u03b3\u028f",
    "z": "\u1d22\u0396",
}
_FOLD: dict[str, str] = {
    **dict.fromkeys(_OPENERS, "<"),
    **dict.fromkeys(_CLOSERS, ">"),
    **dict.fromkeys(_SQUARE_OPENERS, "["),
    **dict.fromkeys(_COLONS, ":"),
    **{ch: latin for latin, chars in _LOOKALIKE_LETTERS.items() for ch in chars},
}
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Mn", "Me"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # Hangul fillers, braille blank
_TAG_CHARS = range(0xE0020, 0xE007F)  # invisible copies of ASCII 0x20..0x7E
_NOT_PLAIN_ASCII = re.compile(r"[^\n\x20-\x7e]")  # folded one by one


@lru_cache(maxsize=8192)
def _fold(char: str) -> str:
    """One character as a fooled reader reads it: "" for an invisible one."""
    if ord(char) in _TAG_CHARS:
        return chr(ord(char) - 0xE0000).casefold()
    if char in _FOLD:
        return _FOLD[char]
    folded = []
    for part in unicodedata.normalize("NFKD", char):
        if part == "\n":
            folded.append(part)
        elif part.isspace():
            folded.append(" ")
        elif part in _FOLD:
            folded.append(_FOLD[part])
        elif unicodedata.category(part) not in _INVISIBLE_CATEGORIES and (
            part not in _BLANK_LETTERS
        ):
            folded.append(part.casefold())
    return "".join(folded)


def skeleton(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, its index in `text`.

    Per character: Unicode tag characters become the ASCII they copy; angle
    brackets, square brackets, colons and letters that look alike become
    `<`, `>`, `[`, `:` and the Latin letter; otherwise NFKD, then invisible
    characters (controls, format characters such as zero-width spaces, bidi
    controls, the soft hyphen; combining marks; unassigned code points; Hangul
    fillers) are dropped,
    whitespace becomes " " ("\\n" stays "\\n") and the rest is case-folded.
    Only "\\n" folds to "\\n", so lines of the skeleton are lines of `text`.
    """
    # Printable ASCII and "\n" fold to their lower case, one for one (a test
    # checks every such character): runs of them are folded whole, and only
    # the characters between go through `_fold` one by one.
    parts: list[str] = []
    origin: list[int] = []
    done = 0
    for match in _NOT_PLAIN_ASCII.finditer(text):
        index = match.start()
        if index > done:
            parts.append(text[done:index].lower())
            origin.extend(range(done, index))
        folded = _fold(match.group())
        parts.append(folded)
        origin.extend([index] * len(folded))
        done = index + 1
    if done < len(text):
        parts.append(text[done:].lower())
        origin.extend(range(done, len(text)))
    return "".join(parts), origin
