"""A long session around the seed's story, for session-budget tests and benches.

Message 1 is the seed's parcel question, answered with the tracking number;
then an ordinary day's chat on other topics, with answers of a few hundred
characters over several lines, like a model's; message 21 is the seed's
follow-up, "Soll Mittwoch kommen", understood only if the tracking number is
still somewhere in what the model was sent. Deterministic: the same chat
every run.
"""

from __future__ import annotations

from chatbridge.core.ports import Prompt
from chatbridge.core.session_fit import strip_bridge
from tests.support.chemitek import CONFUSED, FIRST, SECOND, TRACKING, UNDERSTOOD

TRACKING_NUMBER = "1Z999AA10123456784"

TOPICS = [
    "Wie lange muss ein Ei kochen, damit es wachsweich ist?",
    "Schreib mir eine kurze Absage für das Meeting morgen früh.",
    "Was ist der Unterschied zwischen einer Liste und einem Tupel in Python?",
    "Wie rechne ich 17 Prozent von 2.340 Euro aus?",
    "Gib mir drei Ideen für ein Abendessen mit Linsen.",
    "Wie heißt die Hauptstadt von Australien?",
    "Formuliere das freundlicher: Ihr Angebot ist zu teuer.",
    "Was bedeutet HTTP 429 genau?",
    "Wie viele Kalorien hat eine Banane ungefähr?",
    "Erklär mir kurz, was eine Zinseszinsrechnung ist.",
    "Welche Zimmerpflanzen vertragen wenig Licht?",
    "Übersetze ins Englische: Wir melden uns nächste Woche.",
    "Wie entferne ich einen Rotweinfleck aus Baumwolle?",
    "Was ist ein guter Name für eine Katze, die gerne schläft?",
    "Wie lange dauert ein Flug von Frankfurt nach Lissabon?",
    "Welche Dehnübungen helfen bei Nackenschmerzen?",
    "Was heißt Regex für eine deutsche Postleitzahl?",
    "Fasse den Inhalt von Faust I in zwei Sätzen zusammen.",
    "Wie mache ich eine Sicherungskopie meiner Fotos unter Linux?",
]


def chat(length: int) -> list[str]:
    """`length` user messages: the parcel question, other topics, and (at 21)
    the follow-up; past 21 the topics go round again, numbered."""
    messages = [FIRST]
    while len(messages) < length:
        position = len(messages) + 1
        if position == 21:
            messages.append(SECOND)
            continue
        topic = TOPICS[(position - 2) % len(TOPICS)]
        messages.append(topic if position < 21 else f"{topic} (Frage {position})")
    return messages


def answer_to(text: str) -> str:
    """A model's answer: the seed's two, or a few hundred characters on the topic."""
    if text.rstrip().endswith(SECOND):
        return "?"  # decided by `answer` from the whole prompt
    if text == FIRST:
        return TRACKING
    topic = text.rstrip("?.!")
    return "\n".join(
        [
            f"Gern, zu deiner Frage ({topic}):",
            "Die kurze Antwort steht in der ersten Zeile, die Einzelheiten folgen.",
            "Erstens kommt es auf die Umstände an, zweitens auf das, was du vorhast.",
            "Drittens lohnt es sich, das Ergebnis einmal selbst zu prüfen.",
            "Wenn du magst, erkläre ich dir jeden Schritt noch genauer, mit Beispielen.",
            "Sag einfach Bescheid, falls etwas unklar geblieben ist.",
        ]
    )


def answer(prompt: Prompt) -> list[str]:
    """A `ScriptedProvider` script: answers the prompt's last message."""
    last = strip_bridge(prompt.messages[-1].content)
    if last.rstrip().endswith(SECOND):
        seen = "\n".join(turn.content for turn in prompt.messages)
        return [UNDERSTOOD if TRACKING_NUMBER in seen else CONFUSED]
    return [answer_to(last)]
