"""Dependencies point inward (README, "Layout"), checked on the real import graph:

* core imports no platform, provider or config module, except its one
  composition root, `chatbridge.core.app`, which wires them together;
* platforms and providers import core's contracts (`chatbridge.core.ports`
  and the rest of core), never each other and never the composition root;
* core has no import cycles;
* the store backends (`chatbridge.stores`) are an edge too: only the
  composition root imports them; each backend package imports core (its
  contracts in `chatbridge.core.ports.store`), never platforms, providers,
  config, the root or another backend (what they share is `stores/_*.py`);
  no core module outside the root imports `redis`.

The graph is read from the source with `ast` (every `import` and `from …
import`, relative ones resolved, imports inside functions included), because
the installed package maps `chatbridge.core` etc. to top-level folders, which
file-tree based tools such as grimp and import-linter cannot follow.
"""

from __future__ import annotations

import ast
import importlib
import typing
from functools import cache
from pathlib import Path

from chatbridge.config import PlatformsConfig
from chatbridge.core.ports import PlatformContext

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"core": "chatbridge.core", "platforms": "chatbridge.platforms",
           "providers": "chatbridge.providers", "stores": "chatbridge.stores",
           "config": "chatbridge.config"}  # fmt: skip
EDGES = ("chatbridge.platforms", "chatbridge.providers", "chatbridge.stores", "chatbridge.config")
ROOT = "chatbridge.core.app"


def _module_name(path: Path) -> str:
    folder, *rest = path.relative_to(REPO).with_suffix("").parts
    parts = [FOLDERS[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


@cache
def graph() -> dict[str, set[str]]:
    """Module -> the chatbridge modules it imports (only names that are modules)."""
    files = {
        _module_name(path): path for folder in FOLDERS for path in (REPO / folder).rglob("*.py")
    }
    return {
        module: {name for name in _imports(path, module) if name in files and name != module}
        for module, path in files.items()
    }


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_core_outside_the_composition_root_imports_no_edge() -> None:
    offenders = sorted(
        f"{module} -> {imported}"
        for module, imports in graph().items()
        if _within(module, "chatbridge.core") and not _within(module, ROOT)
        for imported in imports
        if imported.startswith(EDGES)
    )
    assert offenders == []


@cache
def external_imports() -> dict[str, set[str]]:
    """Module -> every top-level package it imports (redis, sqlite3, ...)."""
    return {
        _module_name(path): {name.split(".")[0] for name in _imports(path, _module_name(path))}
        for folder in FOLDERS
        for path in (REPO / folder).rglob("*.py")
    }


def _backend_offenders() -> list[str]:
    """Core modules outside the composition root that import `redis` (issue
    15: the engine and the schedulers know the `Store` contract only; core/app
    picks the backend, a package of `chatbridge.stores`)."""
    outside = [m for m in graph() if _within(m, "chatbridge.core") and not _within(m, ROOT)]
    return sorted(f"{m} -> redis" for m in outside if "redis" in external_imports()[m])


def test_core_outside_the_root_imports_no_redis() -> None:
    assert _backend_offenders() == []


STORES = "chatbridge.stores"


def _store_importers() -> list[str]:
    """Modules outside the composition root and the stores that import a store
    backend (or the stores' registry)."""
    return sorted(
        f"{module} -> {imported}"
        for module, imports in graph().items()
        if not _within(module, ROOT) and not _within(module, STORES)
        for imported in imports
        if _within(imported, STORES)
    )


def test_only_the_composition_root_imports_the_stores() -> None:
    assert _store_importers() == []


def _backend(module: str) -> str | None:
    """`chatbridge.stores.redis._lease` -> "chatbridge.stores.redis"; None for
    the stores' own shared modules (`chatbridge.stores`, `chatbridge.stores._codec`)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[2].startswith("_"):
        return None
    return ".".join(parts[:3])


def _store_offenders() -> list[str]:
    """Store modules importing an edge, the root, the stores' registry or
    another backend."""
    forbidden = (*(e for e in EDGES if e != STORES), ROOT)
    found = []
    for module, imports in graph().items():
        if not _within(module, STORES) or module == STORES:
            continue
        for imported in imports:
            own, theirs = _backend(module), _backend(imported)
            if any(_within(imported, f) for f in forbidden) or imported == STORES:
                found.append(f"{module} -> {imported}")
            elif _within(imported, STORES) and theirs is not None and theirs != own:
                found.append(f"{module} -> {imported}")
    return sorted(found)


def test_stores_import_core_never_another_edge_nor_each_other() -> None:
    assert _store_offenders() == []


def test_platforms_and_providers_never_import_each_other_or_the_root() -> None:
    rules = (
        ("chatbridge.platforms", ("chatbridge.providers", ROOT)),
        ("chatbridge.providers", ("chatbridge.platforms", ROOT)),
    )
    offenders = sorted(
        f"{module} -> {imported}"
        for importer, forbidden in rules
        for module, imports in graph().items()
        if _within(module, importer)
        for imported in imports
        if any(_within(imported, f) for f in forbidden)
    )
    assert offenders == []


def _cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in modules.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in modules:
        if node not in index:
            visit(node)
    return groups


def test_no_module_cycles_in_core() -> None:
    core = {
        module: {i for i in imports if _within(i, "chatbridge.core")}
        for module, imports in graph().items()
        if _within(module, "chatbridge.core")
    }
    # A package's __init__ re-exporting its submodules is not a cycle of design.
    for module, imports in core.items():
        imports.difference_update(m for m in list(imports) if _within(module, m))
    assert _cycles(core) == []


def test_the_checks_can_fail() -> None:
    """Positive controls: the graph sees real edges, and the cycle finder finds cycles."""
    assert "chatbridge.core.ports" in graph()["chatbridge.platforms.telegram._outbox"]
    assert "chatbridge.config" in graph()["chatbridge.core.app.wiring"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert "redis" in external_imports()["chatbridge.stores.redis._lease"]
    assert "chatbridge.core.ports.store" in graph()["chatbridge.core.engine"]
    assert "chatbridge.stores" in graph()["chatbridge.core.app.wiring"]
    assert "chatbridge.core.ports.store" in graph()["chatbridge.stores.redis._conn"]
    assert "chatbridge.stores._codec" in graph()["chatbridge.stores.sqlite._inbox"]
    assert _backend("chatbridge.stores.redis._lease") == "chatbridge.stores.redis"
    assert _backend("chatbridge.stores._codec") is None


# -- the platform edge (issue 19): typed factories, no server, no concrete engine ----------

PLATFORM_PACKAGES = ("telegram", "discord", "slack")
# What an adapter may not reach for: the composition root (the rule above), the
# config models (its settings are its own Protocol), the concrete engine (the
# contracts in `core.ports` say all it calls), the web server (routes are declared).
PLATFORM_FORBIDDEN = ("chatbridge.config", "chatbridge.core.engine", "aiohttp.web")


def _platform_offenders(modules: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} -> {imported}"
        for module, imports in modules.items()
        if _within(module, "chatbridge.platforms")
        for imported in imports
        if any(_within(imported, forbidden) for forbidden in PLATFORM_FORBIDDEN)
    )


@cache
def raw_imports() -> dict[str, set[str]]:
    """Module -> every name it imports, chatbridge's or not (`aiohttp.web` included)."""
    return {
        _module_name(path): _imports(path, _module_name(path))
        for folder in FOLDERS
        for path in (REPO / folder).rglob("*.py")
    }


def test_platforms_import_neither_config_nor_the_engine_nor_a_web_server() -> None:
    assert _platform_offenders(raw_imports()) == []


def _untyped(function: object, names: tuple[str, ...]) -> list[str]:
    """`names` of `function`'s parameters (and "return") not annotated, or annotated
    with `Any` or `object` anywhere in the annotation."""
    hints = typing.get_type_hints(function)

    def loose(hint: object) -> bool:
        return hint in (typing.Any, object) or any(loose(a) for a in typing.get_args(hint))

    return [name for name in names if name not in hints or loose(hints[name])]


def _factory_problems(package: str) -> list[str]:
    """What is wrong with `chatbridge.platforms.<package>.from_config` and its adapter."""
    module = importlib.import_module(f"chatbridge.platforms.{package}")
    factory = module.from_config
    problems = [f"{package}.from_config: {n}" for n in _untyped(factory, FACTORY_PARAMETERS)]
    hints = typing.get_type_hints(factory)
    if hints.get("context") is not PlatformContext:
        problems.append(f"{package}.from_config: context is not core.ports.PlatformContext")
    settings, platform = hints.get("settings"), hints.get("return")
    if not getattr(settings, "_is_protocol", False):
        problems.append(f"{package}.from_config: settings is not a Protocol")
    if isinstance(platform, type):
        constructor = platform.__init__  # type: ignore[misc]
        problems += [f"{platform.__name__}: {n}" for n in _untyped(constructor, ("config",))]
        missing = {"name", "routes", "connected", "start", "outbox"} - set(dir(platform))
        problems += [f"{platform.__name__} lacks {m}" for m in sorted(missing)]
    else:
        problems.append(f"{package}.from_config returns no class")
    return problems


FACTORY_PARAMETERS = ("settings", "context", "return")


def test_every_platform_factory_and_adapter_is_typed() -> None:
    """`from_config(settings: <its Protocol>, context: PlatformContext) -> <its
    Platform>`, and the adapter's `config` typed: no `Any` on the platform edge."""
    problems = [p for package in PLATFORM_PACKAGES for p in _factory_problems(package)]
    assert problems == []


def _settings_gaps(package: str) -> list[str]:
    """Members of the platform's settings Protocol its config section does not have."""
    hints = typing.get_type_hints(
        importlib.import_module(f"chatbridge.platforms.{package}").from_config
    )
    members = {m for m in vars(hints["settings"]) if not m.startswith("_")}
    section = type(getattr(PlatformsConfig(), package))
    have = set(section.model_fields) | set(dir(section))
    return sorted(f"{package}: {m}" for m in members - have)


def test_every_config_section_has_what_its_platform_reads() -> None:
    assert [gap for package in PLATFORM_PACKAGES for gap in _settings_gaps(package)] == []


def test_the_platform_checks_can_fail() -> None:
    """Positive controls for the rules above."""
    bad = {"chatbridge.platforms.console": {"chatbridge.core.engine"}}
    assert _platform_offenders(bad) == ["chatbridge.platforms.console -> chatbridge.core.engine"]

    def loose(settings: typing.Any, context: PlatformContext) -> object: ...

    assert _untyped(loose, FACTORY_PARAMETERS) == ["settings", "return"]
    assert "aiohttp" in raw_imports()["chatbridge.platforms.discord._locate"]
