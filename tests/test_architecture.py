"""Dependencies point inward (DESIGN.md), checked on the real import graph.

grimp (import-linter's graph library) builds the graph of `chatbridge`;
each rule below fails with the offending import chain.
"""

from __future__ import annotations

import grimp
import pytest

EDGES = ("chatbridge.platforms", "chatbridge.providers", "chatbridge.config")
ROOT = "chatbridge.core.app"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("chatbridge", cache_dir=None)


def _core_modules(graph: grimp.ImportGraph) -> set[str]:
    modules = graph.find_descendants("chatbridge.core") | {"chatbridge.core"}
    inside_root = graph.find_descendants(ROOT) | {ROOT}
    return modules - inside_root


def test_core_outside_the_composition_root_imports_no_edge(graph: grimp.ImportGraph) -> None:
    offenders = []
    for module in sorted(_core_modules(graph)):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(EDGES):
                offenders.append(f"{module} -> {imported}")
    assert offenders == []


def test_platforms_and_providers_never_import_each_other(graph: grimp.ImportGraph) -> None:
    for importer, imported in (
        ("chatbridge.platforms", "chatbridge.providers"),
        ("chatbridge.providers", "chatbridge.platforms"),
        ("chatbridge.platforms", ROOT),
        ("chatbridge.providers", ROOT),
    ):
        chains = graph.find_shortest_chains(importer=importer, imported=imported)
        assert not chains, f"{importer} reaches {imported}: {sorted(chains)}"


def test_no_module_cycles_in_core(graph: grimp.ImportGraph) -> None:
    cycles = []
    for module in sorted(graph.find_descendants("chatbridge.core")):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("chatbridge.core") and imported != module:
                back = graph.find_shortest_chain(importer=imported, imported=module)
                if back is not None:
                    cycles.append(" -> ".join((module, *back)))
    assert cycles == []


def test_the_rules_can_fail(graph: grimp.ImportGraph) -> None:
    """Positive control: the graph does see real edges, so an empty result means something."""
    assert "chatbridge.core.ports" in graph.find_modules_directly_imported_by(
        "chatbridge.platforms.telegram._outbox"
    )
    assert graph.find_shortest_chain(importer=ROOT, imported="chatbridge.config") is not None
