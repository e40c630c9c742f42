"""The optional SDKs stay optional: each is imported only inside the part it
serves, and the start-up check (`core/app/preflight.py`) knows every package
of every extra in pyproject.toml, so a missing one is named, not a traceback.
(`tests/scenarios/test_optional_sdks.py` runs the bot without them.)"""

from __future__ import annotations

import re
import tomllib

from chatbridge.core.app import preflight
from tests.support.paths import REPO
from tests.test_architecture import FOLDERS, _imports, _module_name

# Top-level module -> the only package that may import it.
HOME = {
    "telegram": "chatbridge.platforms.telegram",
    "telegramify_markdown": "chatbridge.platforms.telegram",
    "discord": "chatbridge.platforms.discord",
    "slack_bolt": "chatbridge.platforms.slack",
    "slack_sdk": "chatbridge.platforms.slack",
    "markdown_to_mrkdwn": "chatbridge.platforms.slack",
    "redis": "chatbridge.stores.redis",
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_optional_sdks_are_imported_only_by_their_part() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            module = _module_name(path)
            for name in _imports(path, module):
                home = HOME.get(name.partition(".")[0])
                if home is not None and not _within(module, home):
                    offenders.append(f"{module} -> {name}")
    assert sorted(set(offenders)) == []


def _extras() -> dict[str, set[str]]:
    with (REPO / "pyproject.toml").open("rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    return {
        extra: {re.split(r"[\[<>=;\s]", spec, maxsplit=1)[0].lower() for spec in specs}
        for extra, specs in extras.items()
        if extra not in ("all", "dev")
    }


def test_the_start_up_check_knows_every_package_of_every_extra() -> None:
    known = {
        extra: {distribution.lower() for _, distribution in packages}
        for extra, packages in preflight._EXTRAS.items()
    }
    assert known == _extras()


def test_all_is_every_extra_and_dev_includes_all() -> None:
    with (REPO / "pyproject.toml").open("rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    (everything,) = extras["all"]
    assert set(everything.removeprefix("chatbridge[").removesuffix("]").split(",")) == set(
        _extras()
    )
    assert "chatbridge[all]" in extras["dev"], "README's set-up would miss an SDK"
