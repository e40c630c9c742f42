"""A process-wide tally of what the reliability suite did, for one table.

Fuzz tests count each generated input (`add("inputs fuzzed", "telegram updates")`),
the kill loop records its figures, and `tests/reliability/plugin.py` counts the
outcomes of the fault, secret and leak tests. `render()` gives the table that
`python -m tests.reliability` prints; nothing is ever written to a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SECTIONS", "TALLY", "Tally", "add", "add_part", "record_kill_loop", "render"]

SECTIONS = (
    "inputs fuzzed",
    "faults injected",
    "crash runs",
    "checks passed",
    "leaks found",
    "secrets found",
    "unhandled exceptions",
    "wrong results",
    "lost exchanges",
    "extra bot messages",
)
# Sections whose figures must be 0: shown as 0 even when nothing was added.
MUST_BE_ZERO = (
    "leaks found", "secrets found", "unhandled exceptions", "wrong results", "lost exchanges",
)  # fmt: skip


@dataclass
class Tally:
    """Counts per section, then per name (input class, fault kind, ...)."""

    sections: dict[str, dict[str, int]] = field(
        default_factory=lambda: {name: {} for name in SECTIONS}
    )
    # Subsets of a row (section -> row -> part -> count): shown under the row,
    # never added to the section's total.
    parts: dict[str, dict[str, dict[str, int]]] = field(
        default_factory=lambda: {name: {} for name in SECTIONS}
    )
    printed: bool = False

    def add(self, section: str, name: str, n: int = 1) -> None:
        counts = self._section(section)
        counts[name] = counts.get(name, 0) + n

    def add_part(self, section: str, name: str, part: str, n: int = 1) -> None:
        """Count `n` of row `name` as also being `part` (e.g. "SDK rejected")."""
        self._section(section)
        counts = self.parts[section].setdefault(name, {})
        counts[part] = counts.get(part, 0) + n

    def _section(self, section: str) -> dict[str, int]:
        if section not in self.sections:
            raise KeyError(f"unknown tally section {section!r}; one of {', '.join(SECTIONS)}")
        return self.sections[section]

    def empty(self) -> bool:
        return not any(self.sections.values())

    def render(self) -> str:
        """One plain-text table: section, name, count; a total per section (parts,
        shown as "of which ..." under their row, are not in it)."""
        rows: list[tuple[str, str, str]] = []
        for section in SECTIONS:
            counts = self.sections[section]
            if not counts and section not in MUST_BE_ZERO:
                continue
            rows.append((section, "total", f"{sum(counts.values()):,}"))
            for name, n in sorted(counts.items()):
                rows.append(("", name, f"{n:,}"))
                parts = self.parts[section].get(name, {})
                rows.extend(("", f"  of which {p}", f"{k:,}") for p, k in sorted(parts.items()))
        header = ("section", "what", "count")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]

        def line(row: tuple[str, str, str]) -> str:
            return f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}".rstrip()

        rule = "  ".join("-" * w for w in widths)
        return "\n".join([line(header), rule, *(line(r) for r in rows)])


TALLY = Tally()


def add(section: str, name: str, n: int = 1) -> None:
    """Count `n` more of `name` in `section` of the process-wide tally."""
    TALLY.add(section, name, n)


def add_part(section: str, name: str, part: str, n: int = 1) -> None:
    """Count `n` of row `name` in `section` as also being `part` (not added to the total)."""
    TALLY.add_part(section, name, part, n)


def record_kill_loop(
    *,
    kills: int,
    mid_stream: int,
    messages: int,
    unanswered: int,
    duplicates: int,
    partials_left: int,
    reposted: int,
    missing: int,
) -> None:
    """The kill loop's figures (tests/scenarios/test_kill_loop.py)."""
    add("crash runs", "kill loop: SIGKILL restarts", kills)
    add("crash runs", "kill loop: kills with an answer half shown", mid_stream)
    add("crash runs", "kill loop: messages sent", messages)
    add("lost exchanges", "kill loop: unanswered", unanswered)
    add("lost exchanges", "kill loop: missing from memory", missing)
    add("lost exchanges", "kill loop: answered twice", duplicates)
    add("extra bot messages", "kill loop: partial left, killed before its ref was stored",
        partials_left)  # fmt: skip
    add("extra bot messages", "kill loop: other extra messages (re-posts)", reposted)


def render() -> str:
    return TALLY.render()
