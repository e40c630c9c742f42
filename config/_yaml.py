"""YAML text -> plain data plus the line of every key, for line-accurate errors.

`yaml.safe_load` throws positions away, so we compose the node graph ourselves
and build the data while recording where each key path starts. Duplicate keys,
which PyYAML silently resolves to the last one, are reported instead.

Any input costs bounded time and memory: nesting deeper than `MAX_DEPTH`, more
than `MAX_ALIASES` alias uses and aliases that expand to more than
`MAX_EXPANSION` values ("billion laughs") each stop parsing with one problem,
before Python's recursion limit or the machine's memory is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.reader import ReaderError

from ._errors import Loc, format_loc

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_EXPANSION", "ParsedYaml", "parse_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"

MAX_DEPTH = 50
"""Deepest nesting of mappings and lists; the schema itself is four levels deep."""
MAX_ALIASES = 100
"""Alias uses (`*name`) per file; a config needs a handful for `<<: *base` merges."""
MAX_EXPANSION = 10_000
"""Values built through aliases in total; bounds what 100 aliases can multiply to."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses deep nesting and too many aliases.

    PyYAML's composer recurses once per level, so the depth check must run
    here, before the recursion, not on the finished node graph.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"more than {MAX_ALIASES} aliases", mark)
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Refused(Exception):
    """Building stopped: the data would be too large or too deep (one problem, no data)."""

    def __init__(self, node: yaml.Node, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.node, self.loc, self.message = node, loc, message


@dataclass
class ParsedYaml:
    """What the loader needs from a YAML file; `problems` are (line, path, message)."""

    data: Any = None
    lines: dict[Loc, int] = field(default_factory=dict)
    problems: list[tuple[int | None, str, str]] = field(default_factory=list)


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document; syntax errors land in `problems` with path `yaml`.

    Characters YAML refuses (a tab where it needs spaces, NUL and other
    control characters) get their line and what to do, with no path: they
    are about the file's text, not a key.
    """
    result = ParsedYaml()
    try:
        root = yaml.compose(text, Loader=_BoundedLoader)
    except ReaderError as exc:
        result.problems.append((_line_at(text, exc.position), "", _refused_character(exc)))
        return result
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is not None and "'\\t'" in problem:
            result.problems.append((mark.line + 1, "", _tab_problem(text, mark)))
        else:
            result.problems.append((mark.line + 1 if mark else None, "yaml", problem))
        return result
    if root is not None:
        result.lines[()] = root.start_mark.line + 1
        try:
            result.data = _Builder(result).build(root, ())
        except _Refused as refused:
            result.data = None
            line = refused.node.start_mark.line + 1
            where = format_loc(refused.loc[:2]) or "yaml"  # the top of a 50-deep path is enough
            result.problems[:] = [(line, where, refused.message)]
    return result


def _line_at(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _refused_character(exc: ReaderError) -> str:
    char = exc.character if isinstance(exc.character, str) else chr(exc.character)
    if char == "\x00":
        return (
            "NUL bytes (\\x00) are not allowed; save the file as UTF-8 text "
            "(an editor writing UTF-16, or a binary file, puts them there)"
        )
    return f"control character U+{ord(char):04X} is not allowed in YAML; delete it"


def _tab_problem(text: str, mark: Mark) -> str:
    line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
    if not line[: mark.column].strip(" \t"):
        return "tabs are not allowed in YAML indentation; use spaces"
    return f"a tab cannot separate YAML here (column {mark.column + 1}); use a space"


class _Builder:
    """Walks composed nodes; keys stay raw strings so `1:` or `yes:` are not mangled."""

    def __init__(self, result: ParsedYaml) -> None:
        self._result = result
        self._constructor = SafeConstructor()
        self._active: set[int] = set()
        self._seen: set[int] = set()
        self._depth = 0
        self._reused = 0  # > 0 while building a node a second time (through an alias)
        self._expanded = 0

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        if id(node) in self._active:
            self._problem(node, loc, "recursive alias")
            return None
        reuse = id(node) in self._seen
        self._seen.add(id(node))
        self._reused += reuse
        if self._reused:
            self._expanded += 1
            if self._expanded > MAX_EXPANSION:
                message = f"aliases expand to more than {MAX_EXPANSION} values"
                raise _Refused(node, loc, message)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            # Aliases can stack shallow nodes into a deep tree.
            raise _Refused(node, loc, f"nested deeper than {MAX_DEPTH} levels")
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, loc)
            if isinstance(node, yaml.SequenceNode):
                return self._sequence(node, loc)
            return self._scalar(node, loc)
        finally:
            self._active.discard(id(node))
            self._depth -= 1
            self._reused -= reuse

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[str, Any]:
        out: dict[str, Any] = {}
        explicit: dict[str, int] = {}
        # Merges first: explicit keys then overwrite both the values and their recorded lines.
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._merge(out, value_node, loc)
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, loc, "keys must be plain names")
                continue
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in explicit:
                self._problem(
                    key_node, (*loc, key), f"duplicate key (first on line {explicit[key]})"
                )
                continue
            explicit[key] = line
            self._result.lines[(*loc, key)] = line
            out[key] = self.build(value_node, (*loc, key))
        return out

    def _merge(self, out: dict[str, Any], value: yaml.Node, loc: Loc) -> None:
        """`<<: *base` or `<<: [*a, *b]` — earlier sources win, as the YAML spec says."""
        sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for source in sources:
            merged = self.build(source, loc)
            if not isinstance(merged, dict):
                self._problem(source, loc, "'<<' merges mappings only")
                continue
            for key, item in merged.items():
                out.setdefault(key, item)

    def _sequence(self, node: yaml.SequenceNode, loc: Loc) -> list[Any]:
        items = []
        for index, child in enumerate(node.value):
            self._result.lines.setdefault((*loc, index), child.start_mark.line + 1)
            items.append(self.build(child, (*loc, index)))
        return items

    def _scalar(self, node: yaml.Node, loc: Loc) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            self._problem(node, loc, getattr(exc, "problem", None) or str(exc))
            return None
        except ValueError:
            # int() refuses numbers over 4300 digits; dates like 2024-13-45 fail too.
            self._problem(node, loc, "cannot read this value (a number too long, or a bad date)")
            return None

    def _problem(self, node: yaml.Node, loc: Loc, message: str) -> None:
        line = node.start_mark.line + 1
        self._result.problems.append((line, format_loc(loc) or "yaml", message))
