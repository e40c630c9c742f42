"""YAML text -> plain data plus the line of every key, for line-accurate errors.

`yaml.safe_load` throws positions away, so we compose the node graph ourselves
and build the data while recording where each key path starts. Duplicate keys,
which PyYAML silently resolves to the last one, are reported instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from ._errors import Loc, format_loc

__all__ = ["ParsedYaml", "parse_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class ParsedYaml:
    """What the loader needs from a YAML file; `problems` are (line, path, message)."""

    data: Any = None
    lines: dict[Loc, int] = field(default_factory=dict)
    problems: list[tuple[int | None, str, str]] = field(default_factory=list)


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document; syntax errors land in `problems` with path `yaml`."""
    result = ParsedYaml()
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        result.problems.append((mark.line + 1 if mark else None, "yaml", problem))
        return result
    if root is not None:
        result.lines[()] = root.start_mark.line + 1
        result.data = _Builder(result).build(root, ())
    return result


class _Builder:
    """Walks composed nodes; keys stay raw strings so `1:` or `yes:` are not mangled."""

    def __init__(self, result: ParsedYaml) -> None:
        self._result = result
        self._constructor = SafeConstructor()
        self._active: set[int] = set()

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        if id(node) in self._active:
            self._problem(node, loc, "recursive alias")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, loc)
            if isinstance(node, yaml.SequenceNode):
                return self._sequence(node, loc)
            return self._scalar(node, loc)
        finally:
            self._active.discard(id(node))

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

    def _problem(self, node: yaml.Node, loc: Loc, message: str) -> None:
        line = node.start_mark.line + 1
        self._result.problems.append((line, format_loc(loc) or "yaml", message))
