"""pyproject.toml lists the installed packages by hand (`[tool.setuptools]
packages`, with `package-dir` mapping `chatbridge.core` to `core/` etc.,
which setuptools' package finder cannot follow). A new folder left off the
list works in the editable checkout and is missing from a real install
(the Docker image, the systemd steps): this test keeps the list whole."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO


def _setuptools() -> dict[str, object]:
    with (REPO / "pyproject.toml").open("rb") as file:
        tool: dict[str, object] = tomllib.load(file)["tool"]["setuptools"]
    return tool


def test_every_package_folder_is_installed() -> None:
    tool = _setuptools()
    package_dir = tool["package-dir"]
    assert isinstance(package_dir, dict)
    on_disk = set()
    for package, folder in package_dir.items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            on_disk.add(".".join([package, *relative]))
    listed = tool["packages"]
    assert isinstance(listed, list)
    assert sorted(on_disk - set(listed)) == [], "package folders missing from pyproject's list"
    assert sorted(set(listed) - on_disk) == [], "pyproject lists packages that do not exist"
