"""Everything the bot itself says, in the two languages of `bot.language`."""

from __future__ import annotations

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "denied": (
            "Sorry, you are not allowed to use this bot. Ask the admin to add "
            "{user_id} to access.allow in the chatbridge config."
        ),
        "all_failed": (
            "Sorry, the AI service ({providers}) is not answering right now. "
            "Please try again in a few minutes."
        ),
        "misconfigured": (
            "Sorry, I cannot answer: the AI service ({providers}) is not set up "
            "correctly, and only the admin can fix that in the chatbridge config."
        ),
        "interrupted": "[The answer was interrupted: {providers} stopped responding.]",
        "new": "Started a fresh session. I still remember what we talked about today.",
        "forget": "Done: I have forgotten everything I remembered about you.",
        "memory_empty": "I remember nothing from this chat in the last {max_age}.",
        "memory_head": "What I remember from this chat (last {max_age}):",
        "unknown": "Unknown command {command}. Try /help.",
        "empty_answer": "(The AI service returned an empty answer.)",
        "store_failed": "Sorry, my memory is not reachable right now. Please try again later.",
        "inbox_full": (
            "Sorry, I cannot take messages right now; I will answer this one as soon as I can "
            "(if no answer comes, please write again later)."
        ),
        "internal_error": (
            "Sorry, something went wrong on my side; the admin can see why in the log."
        ),
        "undelivered": (
            "Sorry, the chat service would not take my answer (rate limit or refusal); "
            "please ask again in a moment."
        ),
        "not_stored": (
            "(I could not store this exchange, so I will not remember it; the admin has been told.)"
        ),
        "late": (
            "Sorry, I was offline when you wrote “{preview}” and it is too late "
            "to answer now; please ask again if it still matters."
        ),
        "cut_by_restart": "[Interrupted by a restart; I will finish this answer when I am back.]",
        "help": (
            "Just write to me. Commands:\n"
            "/new – start a fresh session (memory is kept)\n"
            "/forget – erase everything I remember about you\n"
            "/memory – show what I remember from this chat\n"
            "/status – model, session and usage\n"
            "/link – join your accounts on other platforms (/unlink undoes it)\n"
            "/help – this text"
        ),
        "status": (
            "Model: {model}\nScope: {scope}\nSession: {session}\nMemory: {ring} "
            "(kept {max_age})\nTokens today: {tokens_in} in, {tokens_out} out"
        ),
        "status_cache": "Prompt cache: {cached} of the last answer's {tokens_in} input tokens",
        "session_live": "started {age} ago, expires after {left} more idle",
        "session_none": "none (the next message starts one)",
        "limit_refused": "Sorry, that would go past {limit}, so I will not answer it; {reset}.",
        "limit_rate": (
            "Please slow down: {limit} of messages per minute ({count}) is reached; "
            "I will answer again in a minute."
        ),
        "limit_own": "your limit",
        "limit_pool": "this chat's shared limit",
        "limit_own_tokens_per_day": "your daily token limit",
        "limit_own_tokens_per_month": "your monthly token limit",
        "limit_own_usd_per_day": "your daily cost limit",
        "limit_own_usd_per_month": "your monthly cost limit",
        "limit_pool_tokens_per_day": "this chat's shared daily token limit",
        "limit_pool_tokens_per_month": "this chat's shared monthly token limit",
        "limit_pool_usd_per_day": "this chat's shared daily cost limit",
        "limit_pool_usd_per_month": "this chat's shared monthly cost limit",
        "limit_reset_day": "it resets at midnight ({zone})",
        "limit_reset_month": "it resets on {date} at 00:00 ({zone})",
        "limit_left_today": "left today: {left}",
        "limit_left_month": "left this month: {left}",
        "limit_tokens": "{count} tokens",
        "link_code": (
            "Your link code: send /link {code} to me from a private chat on your other "
            "platform within 10 minutes (it works once)."
        ),
        "link_done": (
            "Linked: {first} and {second} are one person here now (one memory, one set of "
            "limits); /unlink undoes it."
        ),
        "link_wrong": (
            "That code is wrong, used or expired; send /link in a private chat on your other "
            "platform for a new one."
        ),
        "link_locked": "/link is locked for you after five wrong codes, until {until}.",
        "link_private_only": "I link accounts only in a private chat: send /link to me there.",
        "link_identity": (
            "Your accounts are joined by the admin's config (identity {name}), which you "
            "cannot change with /link or /unlink."
        ),
        "link_own": "That is your own code: send it from your account on the other platform.",
        "unlink_done": "Unlinked: {user} is on its own again and keeps what was written from it.",
        "unlink_none": "{user} is not linked to any other account.",
    },
    "de": {
        "denied": (
            "Du darfst diesen Bot leider nicht benutzen. Bitte den Admin, "
            "{user_id} in access.allow der chatbridge-Konfiguration einzutragen."
        ),
        "all_failed": (
            "Der KI-Dienst ({providers}) antwortet gerade nicht. "
            "Bitte versuch es in ein paar Minuten noch einmal."
        ),
        "misconfigured": (
            "Ich kann leider nicht antworten: Der KI-Dienst ({providers}) ist falsch "
            "eingerichtet, und nur der Admin kann das in der chatbridge-Konfiguration beheben."
        ),
        "interrupted": "[Die Antwort wurde abgebrochen: {providers} antwortet nicht mehr.]",
        "new": "Neue Session gestartet. An heute erinnere ich mich weiterhin.",
        "forget": "Erledigt: Ich habe alles vergessen, was ich mir über dich gemerkt hatte.",
        "memory_empty": "Aus diesem Chat habe ich mir in den letzten {max_age} nichts gemerkt.",
        "memory_head": "Das habe ich mir aus diesem Chat gemerkt (letzte {max_age}):",
        "unknown": "Unbekannter Befehl {command}. Versuch /help.",
        "empty_answer": "(Der KI-Dienst hat eine leere Antwort geliefert.)",
        "store_failed": (
            "Mein Gedächtnis ist gerade nicht erreichbar. Bitte versuch es später noch einmal."
        ),
        "inbox_full": (
            "Ich kann gerade keine Nachrichten annehmen; ich antworte auf diese, sobald es wieder "
            "geht (kommt keine Antwort, schreib bitte später noch einmal)."
        ),
        "internal_error": (
            "Entschuldige, bei mir ist etwas schiefgegangen; der Admin sieht im Log, warum."
        ),
        "undelivered": (
            "Entschuldige, der Chatdienst hat meine Antwort nicht angenommen (Ratenlimit "
            "oder Ablehnung); bitte frag gleich noch einmal."
        ),
        "not_stored": (
            "(Diesen Austausch konnte ich nicht speichern, ich werde mich nicht daran "
            "erinnern; der Admin weiß Bescheid.)"
        ),
        "late": (
            "Entschuldige, ich war offline, als du „{preview}“ geschrieben hast, und "
            "für eine Antwort ist es jetzt zu spät; frag gern noch einmal."
        ),
        "cut_by_restart": "[Durch einen Neustart unterbrochen; ich beende die Antwort danach.]",
        "help": (
            "Schreib mir einfach. Befehle:\n"
            "/new – neue Session (die Erinnerung bleibt)\n"
            "/forget – alles löschen, was ich mir über dich gemerkt habe\n"
            "/memory – zeigen, was ich mir aus diesem Chat gemerkt habe\n"
            "/status – Modell, Session und Verbrauch\n"
            "/link – deine Konten auf anderen Plattformen verknüpfen (/unlink trennt sie)\n"
            "/help – dieser Text"
        ),
        "status": (
            "Modell: {model}\nScope: {scope}\nSession: {session}\nErinnerung: {ring} "
            "(für {max_age})\nTokens heute: {tokens_in} rein, {tokens_out} raus"
        ),
        "status_cache": (
            "Prompt-Cache: {cached} der {tokens_in} Eingabe-Tokens der letzten Antwort"
        ),
        "session_live": "seit {age}, läuft nach {left} Ruhe ab",
        "session_none": "keine (die nächste Nachricht startet eine)",
        "limit_refused": (
            "Das würde {limit} überschreiten, darum beantworte ich das nicht; {reset}."
        ),
        "limit_rate": (
            "Bitte langsamer: {limit} an Nachrichten pro Minute ({count}) ist erreicht; "
            "in einer Minute antworte ich wieder."
        ),
        "limit_own": "dein Limit",
        "limit_pool": "das gemeinsame Limit dieses Chats",
        "limit_own_tokens_per_day": "dein tägliches Token-Limit",
        "limit_own_tokens_per_month": "dein monatliches Token-Limit",
        "limit_own_usd_per_day": "dein tägliches Kostenlimit",
        "limit_own_usd_per_month": "dein monatliches Kostenlimit",
        "limit_pool_tokens_per_day": "das gemeinsame tägliche Token-Limit dieses Chats",
        "limit_pool_tokens_per_month": "das gemeinsame monatliche Token-Limit dieses Chats",
        "limit_pool_usd_per_day": "das gemeinsame tägliche Kostenlimit dieses Chats",
        "limit_pool_usd_per_month": "das gemeinsame monatliche Kostenlimit dieses Chats",
        "limit_reset_day": "es gilt wieder ab Mitternacht ({zone})",
        "limit_reset_month": "es gilt wieder ab dem {date}, 00:00 ({zone})",
        "limit_left_today": "heute übrig: {left}",
        "limit_left_month": "diesen Monat übrig: {left}",
        "limit_tokens": "{count} Tokens",
        "link_code": (
            "Dein Verknüpfungscode: Schick mir /link {code} innerhalb von 10 Minuten aus einem "
            "privaten Chat auf deiner anderen Plattform (er gilt einmal)."
        ),
        "link_done": (
            "Verknüpft: {first} und {second} sind hier jetzt eine Person (eine Erinnerung, "
            "ein Satz Limits); /unlink macht das rückgängig."
        ),
        "link_wrong": (
            "Dieser Code ist falsch, benutzt oder abgelaufen; schick /link in einem privaten "
            "Chat auf deiner anderen Plattform für einen neuen."
        ),
        "link_locked": "/link ist nach fünf falschen Codes für dich gesperrt, bis {until}.",
        "link_private_only": ("Konten verknüpfe ich nur im privaten Chat: Schick mir /link dort."),
        "link_identity": (
            "Deine Konten sind in der Konfiguration des Admins verbunden (Identität {name}); "
            "das kannst du mit /link oder /unlink nicht ändern."
        ),
        "link_own": (
            "Das ist dein eigener Code: Schick ihn von deinem Konto auf der anderen Plattform."
        ),
        "unlink_done": (
            "Getrennt: {user} ist wieder eigenständig und behält, was von dort geschrieben wurde."
        ),
        "unlink_none": "{user} ist mit keinem anderen Konto verknüpft.",
    },
}

COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "Start a fresh session (memory is kept)"),
    ("forget", "Erase everything the bot remembers about you"),
    ("memory", "Show what the bot remembers from this chat"),
    ("status", "Model, session and usage"),
    ("link", "Join your accounts on other platforms into one person"),
    ("unlink", "Undo /link for this account"),
    ("help", "What this bot does"),
)


ENTRIES = {"en": ("entry", "entries"), "de": ("Eintrag", "Einträge")}


def say(language: str, key: str, **values: object) -> str:
    return TEXTS[language][key].format(**values)


def count_entries(language: str, count: int) -> str:
    """`1 entry`, `3 entries` (`1 Eintrag`, `3 Einträge`)."""
    one, many = ENTRIES[language]
    return f"{count} {one if count == 1 else many}"


def human_duration(seconds: float) -> str:
    """`5400` -> `1h 30m`; short and language-neutral."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"
