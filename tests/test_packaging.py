"""What a wheel ships: every package of the library and its Lua (an editable install
hides a package left out of pyproject's list; a user's `pip install` would not)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_of_the_library_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "durables").rglob("__init__.py")
    }
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"
    assert set(config["package-data"]["durables"]) >= {"lua/*.lua", "lua/lib/*.lua", "py.typed",
                                                       "console/static/*"}  # fmt: skip
